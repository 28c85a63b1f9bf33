// The fp16 recipe's linear on the CPU: the GPU's arithmetic emulated (inputs rounded to fp16,
// products accumulated in fp32 through OpenBLAS), with the row scaling and, when the reduction fix
// is off, fp16 partial sums (ops/linear_f16.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"
#include "ops/linear_f16.h"

namespace avdit::ops::cpu {

void linear_f16(const Tensor& x_in, const Tensor& w_in, Tensor& y, F16Linear opt) {
  AVDIT_CHECK(w_in.ndim() == 2 && w_in.dtype() == DType::F16,
              "linear_f16: weight must be F16 [out, in], got {} {}", dtype_name(w_in.dtype()),
              w_in.shape_str());
  AVDIT_CHECK(x_in.dtype() == DType::F32 || x_in.dtype() == DType::F16,
              "linear_f16: x must be F32 or F16, got {}", dtype_name(x_in.dtype()));
  AVDIT_CHECK(y.dtype() == DType::F32 || y.dtype() == DType::F16,
              "linear_f16: y must be F32 or F16, got {}", dtype_name(y.dtype()));
  const int64_t K = w_in.size(1), N = w_in.size(0);
  AVDIT_CHECK(x_in.ndim() >= 1 && x_in.size(-1) == K, "linear_f16: x {} does not match weight {}",
              x_in.shape_str(), w_in.shape_str());
  const int64_t M = K ? x_in.numel() / K : 0;
  AVDIT_CHECK(y.numel() == M * N, "linear_f16: output {} for x {} and weight {}", y.shape_str(),
              x_in.shape_str(), w_in.shape_str());
  // The GEMM's fp16 input: x rounded to fp16, an F32 row first scaled by 2^-k under rowscale.
  Tensor x = x_in.to_f32().clone();
  std::vector<float> factor(static_cast<size_t>(M), 1.0f);
  float* px = x.f32();
  for (int64_t r = 0; r < M; ++r) {
    float* row = px + r * K;
    if (opt.rowscale && x_in.dtype() == DType::F32) {
      float mx = 0.0f;
      for (int64_t c = 0; c < K; ++c) mx = std::max(mx, std::fabs(row[c]));
      const int k = row_scale_exponent(mx);
      if (k > 0) {
        for (int64_t c = 0; c < K; ++c) row[c] = std::ldexp(row[c], -k);
        factor[r] = std::ldexp(1.0f, k);
      }
    }
    for (int64_t c = 0; c < K; ++c) row[c] = round_to(DType::F16, row[c]);
  }
  const Tensor w = w_in.to_f32();
  std::vector<float> out(static_cast<size_t>(M * N), 0.0f);
  const bool split = !opt.reduction && y.dtype() == DType::F16 && K >= kEmulatedSplits;
  if (M > 0 && N > 0 && K > 0) {
    if (!split) {
      sgemm_fixed(true, M, N, K, 1.f, px, K, w.f32(), K, 0.f, out.data(), N);
    } else {
      // Each part's fp32 product rounded to fp16, the parts added in fp16 (the output dtype).
      std::vector<float> part(out.size());
      for (int s = 0; s < kEmulatedSplits; ++s) {
        const int64_t k0 = K * s / kEmulatedSplits, k1 = K * (s + 1) / kEmulatedSplits;
        sgemm_fixed(true, M, N, k1 - k0, 1.f, px + k0, K, w.f32() + k0, K, 0.f, part.data(), N);
        for (size_t i = 0; i < out.size(); ++i)
          out[i] = round_to(DType::F16, out[i] + round_to(DType::F16, part[i]));
      }
    }
  }
  for (int64_t r = 0; r < M; ++r)
    if (factor[r] != 1.0f)
      for (int64_t c = 0; c < N; ++c) out[r * N + c] *= factor[r];
  store(y, out.data());
}

}  // namespace avdit::ops::cpu
