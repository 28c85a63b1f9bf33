// Patch-2 moves (see patch.h): video[c, t, 2h+q, 2w+r] <-> patches[t, h, w, 4c + 2r + q].
#include "models/vae/wan22/patch.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/space_shuffle3d.h"

namespace avdit::models::vae::wan22 {

namespace {

// Calls f(patch offset, video offset) for every value: the patch layout [T, h, w, 3 P P] (channel,
// then row r and column q inside the patch, as the reference's rearrange) against the video
// [3, T, h P, w P].
template <class F>
void for_each_value(int64_t T, int64_t h, int64_t w, F&& f) {
  const int64_t C = 3, P = kPatch;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t r = 0; r < P; ++r)
            for (int64_t q = 0; q < P; ++q)
              f(((t * h + y) * w + x) * C * P * P + c * P * P + r * P + q,
                ((c * T + t) * h * P + y * P + q) * w * P + x * P + r);
}

}  // namespace

Tensor unpatchify(const Tensor& p) {
  const int64_t C = 3, P = kPatch;
  AVDIT_CHECK(p.ndim() == 4 && p.size(3) == C * P * P && p.dtype() == DType::F32, "unpatchify: {}",
              p.shape_str());
  const int64_t T = p.size(0), h = p.size(1), w = p.size(2);
  Tensor v = Tensor::empty({C, T, h * P, w * P}, DType::F32);
  const float* src = p.f32();
  float* dst = v.f32();
  for_each_value(T, h, w, [&](int64_t pi, int64_t vi) { dst[vi] = src[pi]; });
  return v;
}

Tensor patchify(const Tensor& v) {
  const int64_t C = 3, P = kPatch;
  AVDIT_CHECK(v.ndim() == 4 && v.size(0) == C && v.size(2) % P == 0 && v.size(3) % P == 0 &&
                  v.dtype() == DType::F32,
              "patchify: {}", v.shape_str());
  const int64_t T = v.size(1), h = v.size(2) / P, w = v.size(3) / P;
  Tensor p = Tensor::empty({T, h, w, C * P * P}, DType::F32);
  const float* src = v.f32();
  float* dst = p.f32();
  for_each_value(T, h, w, [&](int64_t pi, int64_t vi) { dst[pi] = src[vi]; });
  return p;
}

Tensor patches_to_frames(ops::Context& ctx, const Tensor& p) {
  const int64_t C = 3, P = kPatch;
  AVDIT_CHECK(p.ndim() == 4 && p.size(3) == C * P * P, "patches_to_frames: {}", p.shape_str());
  // Frame pixel (2y + q, 2x + r), colour c reads channel 4c + 2r + q: so = 4, si = 1, sj = 2.
  ops::ChannelsToSpace s;
  s.fs = P;
  s.out_channels = C;
  s.so = P * P;
  s.si = 1;
  s.sj = P;
  return ops::channels_to_space3d(ctx, p, s);
}

Tensor frames_to_video(const Tensor& frames) {
  AVDIT_CHECK(frames.ndim() == 4 && frames.size(3) == 3, "frames_to_video: {}", frames.shape_str());
  const int64_t T = frames.size(0), H = frames.size(1), W = frames.size(2), HW = H * W;
  Tensor v = Tensor::empty({3, T, H, W}, DType::F32);
  static ThreadPool pool(std::max(1, std::min(default_thread_count(), 16)));
  pool.run(T, [&](int64_t t) {
    const Tensor f = frames.slice_rows(t, t + 1).to(DType::F32);  // one frame, widened exactly
    const float* src = f.f32();
    for (int64_t c = 0; c < 3; ++c) {
      float* dst = v.f32() + (c * T + t) * HW;
      for (int64_t i = 0; i < HW; ++i) dst[i] = src[i * 3 + c];
    }
  });
  return v;
}

Tensor concat_frames(const std::vector<Tensor>& parts, int64_t frames) {
  AVDIT_CHECK(!parts.empty() && frames >= 0, "concat_frames: nothing to stack");
  Shape shape = parts[0].shape();
  shape[0] = frames;
  Tensor out = Tensor::empty(shape, DType::F32);
  const int64_t row = frames > 0 ? out.numel() / frames : 0;
  int64_t r = 0;
  for (const Tensor& p : parts) {
    AVDIT_CHECK(p.dtype() == DType::F32 && p.numel() == p.size(0) * row,
                "concat_frames: part {} for frames of {} values", p.shape_str(), row);
    const int64_t n = std::min(p.size(0), frames - r);
    if (n <= 0) break;
    std::memcpy(out.f32() + r * row, p.f32(), static_cast<size_t>(n * row) * sizeof(float));
    r += n;
  }
  AVDIT_CHECK(r == frames, "concat_frames: {} of {} frames", r, frames);
  return out;
}

}  // namespace avdit::models::vae::wan22
