// BigVGAN's anti-aliased SnakeBeta on the CPU, one (row, channel) per task: the channel is
// upsampled, activated and decimated in buffers of its own length x ratio, in the reference's
// order of operations (ops/conv1d_alias_free.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "ops/conv1d_alias_free.h"
#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"
#include "ops/snake_beta.h"

namespace avdit::ops::cpu {

void conv1d_alias_free_snake(const Tensor& x_in, const Tensor& up_in, const Tensor& down_in,
                             const Tensor& alpha_in, const Tensor& beta_in, int64_t r, Tensor& y) {
  const Tensor x = f32(x_in), up = f32(up_in), down = f32(down_in), alpha = f32(alpha_in),
               beta = f32(beta_in);
  AVDIT_CHECK(y.shape() == x.shape(), "conv1d_alias_free_snake: output {} for {}", y.shape_str(),
              x.shape_str());
  const int64_t C = x.size(1), L = x.size(2), rows = x.size(0) * C;
  const int64_t Ku = up.numel(), Kd = down.numel();
  // UpSample1d: replicate padding at the low rate, then the transposed conv's edges cropped.
  const int64_t pad = Ku / r - 1;
  const int64_t crop_left = pad * r + (Ku - r) / 2;
  // DownSample1d (LowPassFilter1d): replicate padding at the high rate.
  const int64_t pad_left = Kd / 2 - (Kd % 2 == 0 ? 1 : 0), pad_right = Kd / 2;
  const int64_t H = L * r;  // samples at the high rate
  Tensor y32 = y.dtype() == DType::F32 ? y : Tensor::empty(y.shape(), DType::F32);
  const float* px = x.f32();
  float* py = y32.f32();
  const float* fu = up.f32();
  const float* fd = down.f32();
  cpu_pool().run(rows, [&](int64_t row) {
    const float* xr = px + row * L;
    const float a = std::exp(alpha.f32()[row % C]);
    const float inv = 1.0f / (std::exp(beta.f32()[row % C]) + kSnakeEps);
    // xp: the row replicate-padded by `pad` on each side.
    const int64_t Lp = L + 2 * pad;
    std::vector<float> xp(static_cast<size_t>(Lp));
    for (int64_t i = 0; i < Lp; ++i) xp[i] = xr[std::clamp<int64_t>(i - pad, 0, L - 1)];
    // hp[pad_left + t] = snake(u[t]), u[t] = r * sum over i * r + k = t + crop_left of
    // xp[i] * up[k] (polyphase: k = q mod r, q mod r + r, ... with i falling), then
    // replicate-padded for the low-pass.
    std::vector<float> hp(static_cast<size_t>(pad_left + H + pad_right));
    for (int64_t t = 0; t < H; ++t) {
      const int64_t q = t + crop_left;  // position in the uncropped transposed-conv output
      const int64_t skip = std::max<int64_t>(0, q / r - (Lp - 1));  // taps past the right end
      float acc = 0.0f;
      for (int64_t i = q / r - skip, k = q % r + skip * r; i >= 0 && k < Ku; --i, k += r)
        acc += xp[i] * fu[k];
      const float u = static_cast<float>(r) * acc;
      const float s = std::sin(u * a);
      hp[pad_left + t] = u + inv * (s * s);
    }
    for (int64_t t = 0; t < pad_left; ++t) hp[t] = hp[pad_left];
    for (int64_t t = 0; t < pad_right; ++t) hp[pad_left + H + t] = hp[pad_left + H - 1];
    float* yr = py + row * L;
    for (int64_t j = 0; j < L; ++j) {
      float acc = 0.0f;
      const float* h = hp.data() + j * r;
      for (int64_t k = 0; k < Kd; ++k) acc += h[k] * fd[k];
      yr[j] = acc;
    }
  });
  if (y32.raw() != y.raw()) store(y, y32.f32());
}

}  // namespace avdit::ops::cpu
