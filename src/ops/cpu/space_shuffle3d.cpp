// channels_to_space3d and space_to_channels_mean3d on the CPU: plain loops over the output voxels
// (the gather is exact; the mean sums in fp32 in flat order, then divides once).
#include <cstring>

#include "ops/cpu/common.h"
#include "ops/space_shuffle3d.h"

namespace avdit::ops::cpu {

void channels_to_space3d(const Tensor& x, const ChannelsToSpace& s, Tensor& y) {
  AVDIT_CHECK(x.ndim() == 4 && y.ndim() == 4 && s.ft > 0 && s.fs > 0 && s.div > 0,
              "channels_to_space3d: x {} y {}", x.shape_str(), y.shape_str());
  const int64_t T = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3), Co = s.out_channels;
  AVDIT_CHECK(
      y.size(0) == T * s.ft && y.size(1) == H * s.fs && y.size(2) == W * s.fs && y.size(3) == Co,
      "channels_to_space3d: output {} for x {}", y.shape_str(), x.shape_str());
  const int64_t last = ((Co - 1) * s.so + (s.ft - 1) * s.sa + (s.fs - 1) * (s.si + s.sj)) / s.div;
  AVDIT_CHECK(Co == 0 || last < C, "channels_to_space3d: channel {} of {} read", last, C);
  AVDIT_CHECK(x.dtype() == y.dtype(), "channels_to_space3d: dtypes differ");
  const int64_t esize = dtype_nbytes(x.dtype(), 1);
  const auto* px = static_cast<const char*>(x.raw());
  auto* py = static_cast<char*>(y.mutable_raw());
  const int64_t Ho = H * s.fs, Wo = W * s.fs;
  for (int64_t t = 0; t < T * s.ft; ++t)
    for (int64_t h = 0; h < Ho; ++h)
      for (int64_t w = 0; w < Wo; ++w) {
        const int64_t a = t % s.ft, i = h % s.fs, j = w % s.fs;
        const char* src = px + (((t / s.ft) * H + h / s.fs) * W + w / s.fs) * C * esize;
        char* dst = py + ((t * Ho + h) * Wo + w) * Co * esize;
        const int64_t base = a * s.sa + i * s.si + j * s.sj;
        for (int64_t o = 0; o < Co; ++o)
          std::memcpy(dst + o * esize, src + ((o * s.so + base) / s.div) * esize,
                      static_cast<size_t>(esize));
      }
}

void space_to_channels_mean3d(const Tensor& x_in, const SpaceToChannelsMean& s, Tensor& y) {
  AVDIT_CHECK(x_in.ndim() == 4 && y.ndim() == 4 && s.ft > 0 && s.fs > 0 && s.out_channels > 0,
              "space_to_channels_mean3d: x {} y {}", x_in.shape_str(), y.shape_str());
  const int64_t T = x_in.size(0), H = x_in.size(1), W = x_in.size(2), C = x_in.size(3);
  const int64_t F = s.ft * s.fs * s.fs, Co = s.out_channels;
  AVDIT_CHECK(T % s.ft == 0 && H % s.fs == 0 && W % s.fs == 0 && (C * F) % Co == 0,
              "space_to_channels_mean3d: x {} with factors {}x{} into {} channels",
              x_in.shape_str(), s.ft, s.fs, Co);
  const int64_t To = T / s.ft, Ho = H / s.fs, Wo = W / s.fs, group = C * F / Co;
  AVDIT_CHECK(y.size(0) == To && y.size(1) == Ho && y.size(2) == Wo && y.size(3) == Co,
              "space_to_channels_mean3d: output {} for x {}", y.shape_str(), x_in.shape_str());
  const Tensor x = f32(x_in);
  Tensor y32 = y.dtype() == DType::F32 ? y : Tensor::empty(y.shape(), DType::F32);
  const float* px = x.f32();
  float* py = y32.f32();
  for (int64_t t = 0; t < To; ++t)
    for (int64_t h = 0; h < Ho; ++h)
      for (int64_t w = 0; w < Wo; ++w)
        for (int64_t o = 0; o < Co; ++o) {
          float sum = 0.f;
          for (int64_t g = 0; g < group; ++g) {
            const int64_t flat = o * group + g, c = flat / F, r = flat % F;
            const int64_t a = r / (s.fs * s.fs), i = (r / s.fs) % s.fs, j = r % s.fs;
            sum += px[(((t * s.ft + a) * H + h * s.fs + i) * W + w * s.fs + j) * C + c];
          }
          py[((t * Ho + h) * Wo + w) * Co + o] = sum / static_cast<float>(group);
        }
  if (y32.raw() != y.raw()) store(y, py);
}

}  // namespace avdit::ops::cpu
