// Layout and finiteness checks of the media writers' input tensors (see tensor_checks.h).
#include "io/media/tensor_checks.h"

#include <cmath>

#include "core/error.h"

namespace avdit::media {

namespace {

void check_float_cpu(const Tensor& t, std::string_view name, std::string_view layout) {
  AVDIT_REQUIRE(t.defined(), "tensor '{}' is empty; expected {} float32", name, layout);
  AVDIT_REQUIRE(t.device() == Device::CPU, "tensor '{}' is on the GPU; copy it to the CPU first",
                name);
  AVDIT_REQUIRE(t.dtype() == DType::F32,
                "tensor '{}' is {}; expected {} float32 (convert it first)", name,
                dtype_name(t.dtype()), layout);
}

// The index of the first non-finite value among p[begin, end), or -1.
int64_t first_non_finite(const float* p, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i)
    if (!std::isfinite(p[i])) return i;
  return -1;
}

// "frame 3, channel 1, y 4, x 5" for a flat index into a tensor with the given axis names.
std::string position(const Shape& shape, int64_t flat, std::initializer_list<const char*> axes) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::string s;
  size_t d = 0;
  for (const char* axis : axes) {
    s += fmt::format("{}{} {}", d ? ", " : "", axis, idx[d]);
    ++d;
  }
  return s;
}

void require_finite(const Tensor& t, std::string_view name, std::initializer_list<const char*> axes,
                    int64_t begin = 0, int64_t end = -1) {
  const int64_t bad = first_non_finite(t.f32(), begin, end < 0 ? t.numel() : end);
  AVDIT_REQUIRE(bad < 0,
                "tensor '{}' {} holds a non-finite value ({}) at {}; check the decoder's output "
                "(nothing was written)",
                name, t.shape_str(), t.f32()[bad], position(t.shape(), bad, axes));
}

}  // namespace

void check_frames(const Tensor& frames, std::string_view name) {
  check_float_cpu(frames, name, "[T, 3, H, W]");
  AVDIT_REQUIRE(frames.ndim() == 4 && frames.size(1) == 3,
                "tensor '{}' is {}; expected frames [T, 3, H, W] (RGB, channel-first)", name,
                frames.shape_str());
  AVDIT_REQUIRE(frames.numel() > 0, "tensor '{}' is {}: no frames to write", name,
                frames.shape_str());
}

void check_frame_values(const Tensor& frames, int64_t t, std::string_view name) {
  const int64_t per_frame = frames.numel() / frames.size(0);
  require_finite(frames, name, {"frame", "channel", "y", "x"}, t * per_frame, (t + 1) * per_frame);
}

void check_frame(const Tensor& frame, std::string_view name) {
  check_float_cpu(frame, name, "[3, H, W]");
  AVDIT_REQUIRE(frame.ndim() == 3 && frame.size(0) == 3,
                "tensor '{}' is {}; expected one frame [3, H, W] (RGB, channel-first)", name,
                frame.shape_str());
  AVDIT_REQUIRE(frame.numel() > 0, "tensor '{}' is {}: an empty frame", name, frame.shape_str());
  require_finite(frame, name, {"channel", "y", "x"});
}

void check_audio(const Tensor& audio, std::string_view name, int64_t max_channels) {
  check_float_cpu(audio, name, "[channels, samples]");
  AVDIT_REQUIRE(audio.ndim() == 2,
                "tensor '{}' is {}; expected audio [channels, samples] (a mono waveform is "
                "[1, samples])",
                name, audio.shape_str());
  AVDIT_REQUIRE(audio.size(0) >= 1 && audio.size(0) <= max_channels,
                "tensor '{}' is {}: {} channels, this format takes 1 to {}", name,
                audio.shape_str(), audio.size(0), max_channels);
  AVDIT_REQUIRE(audio.size(1) > 0, "tensor '{}' is {}: no samples to write", name,
                audio.shape_str());
  require_finite(audio, name, {"channel", "sample"});
}

void check_sample_rate(int sample_rate) {
  AVDIT_REQUIRE(sample_rate > 0 && sample_rate <= 768000,
                "sample rate {} Hz is out of range; expected 1 to 768000 Hz", sample_rate);
}

}  // namespace avdit::media
