// WAV output (see wav_writer.h). libsndfile writes through virtual I/O onto an OutputFile, so every
// write, the header rewrite at the end and the close are checked and the file appears whole.
#include "io/media/wav_writer.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "io/media/output_file.h"
#include "io/media/tensor_checks.h"

namespace avdit::media {

namespace {

constexpr int64_t kMaxWavChannels = 64;
constexpr int64_t kChunk = 8192;  // samples per channel per write

OutputFile& file_of(void* user) { return *static_cast<OutputFile*>(user); }

sf_count_t vio_length(void* user) { return file_of(user).size(); }
sf_count_t vio_seek(sf_count_t offset, int whence, void* user) {
  return file_of(user).seek(offset, whence);
}
sf_count_t vio_read(void* ptr, sf_count_t n, void* user) {
  const int64_t r = file_of(user).read_some(ptr, static_cast<size_t>(n));
  return r < 0 ? 0 : r;
}
sf_count_t vio_write(const void* ptr, sf_count_t n, void* user) {
  const int64_t w = file_of(user).write_some(ptr, static_cast<size_t>(n));
  return w < 0 ? 0 : w;  // libsndfile sees a short write; OutputFile keeps the errno
}
sf_count_t vio_tell(void* user) { return file_of(user).tell(); }

[[noreturn]] void fail(const std::filesystem::path& path, OutputFile& out, const char* what) {
  if (out.first_error())
    throw RuntimeFailure(fmt::format("{}: writing failed: {}; nothing was written", path.string(),
                                     std::strerror(out.first_error())));
  throw RuntimeFailure(fmt::format("{}: libsndfile: {}; nothing was written", path.string(), what));
}

}  // namespace

void write_wav(const std::filesystem::path& path, const Tensor& audio, int sample_rate,
               WavFormat format) {
  check_audio(audio, "audio", kMaxWavChannels);
  check_sample_rate(sample_rate);
  const int64_t channels = audio.size(0), samples = audio.size(1);
  OutputFile out(path);

  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = static_cast<int>(channels);
  info.format = SF_FORMAT_WAV | (format == WavFormat::Float32 ? SF_FORMAT_FLOAT : SF_FORMAT_PCM_16);
  // libsndfile itself switches a WAV over 4 GiB to RF64 only with SF_FORMAT_RF64; refuse instead
  // of writing a header whose sizes wrapped around.
  const int64_t bytes = channels * samples * (format == WavFormat::Float32 ? 4 : 2);
  AVDIT_REQUIRE(bytes < (int64_t{1} << 32) - 4096,
                "{}: {} channels x {} samples do not fit a WAV file (4 GiB); write a shorter clip",
                path.string(), channels, samples);
  SF_VIRTUAL_IO vio{vio_length, vio_seek, vio_read, vio_write, vio_tell};
  SNDFILE* sf = sf_open_virtual(&vio, SFM_WRITE, &info, &out);
  if (!sf) fail(path, out, sf_strerror(nullptr));

  // libsndfile takes interleaved frames; the tensor is channel-major.
  const float* src = audio.f32();
  std::vector<float> f32;
  std::vector<short> s16;
  bool ok = true;
  for (int64_t begin = 0; ok && begin < samples; begin += kChunk) {
    const int64_t n = std::min(kChunk, samples - begin);
    if (format == WavFormat::Float32) {
      f32.resize(static_cast<size_t>(n * channels));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < channels; ++c) f32[i * channels + c] = src[c * samples + begin + i];
      ok = sf_writef_float(sf, f32.data(), n) == n;
    } else {
      s16.resize(static_cast<size_t>(n * channels));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < channels; ++c) {
          const float x = std::clamp(src[c * samples + begin + i], -1.0f, 1.0f);
          s16[i * channels + c] = static_cast<short>(std::nearbyint(x * 32767.0f));
        }
      ok = sf_writef_short(sf, s16.data(), n) == n;
    }
  }
  const std::string error = ok ? "" : sf_strerror(sf);
  const int close_rc = sf_close(sf);  // rewrites the header's sizes
  if (!ok) fail(path, out, error.c_str());
  if (close_rc != 0) fail(path, out, sf_error_number(close_rc));
  out.commit();
}

}  // namespace avdit::media
