// ConvTranspose1d on the CPU: per batch row, a fixed span of input positions is multiplied by the
// weight through sgemm_fixed (each input sample's contribution to Cout x K outputs), then the
// contributions are added into the output channel by channel in input order, so the bits do not
// depend on the thread count.
#include "ops/conv1d_transpose.h"

#include <algorithm>
#include <vector>

#include "core/thread_pool.h"
#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"

namespace avdit::ops::cpu {
namespace {
constexpr int64_t kSpan = 1024;  // input positions per GEMM
}  // namespace

void conv1d_transpose(const Tensor& x_in, const Tensor& w_in, const Tensor* bias_in,
                      const Conv1dTransposeParams& p, Tensor& y) {
  const Tensor x = f32(x_in), w = f32(w_in);
  const int64_t B = x.size(0), Cin = x.size(1), L = x.size(2);
  const int64_t Cout = w.size(1), K = w.size(2), s = p.stride;
  AVDIT_CHECK(w.size(0) == Cin && s >= 1 && p.padding >= 0,
              "conv1d_transpose: x {} with weight {} (stride {})", x.shape_str(), w.shape_str(), s);
  const int64_t Lout = conv1d_transpose_out_length(L, K, p);
  AVDIT_CHECK(y.ndim() == 3 && y.size(0) == B && y.size(1) == Cout && y.size(2) == Lout,
              "conv1d_transpose: output {} for x {} and weight {}", y.shape_str(), x.shape_str(),
              w.shape_str());
  Tensor bias;
  if (bias_in) {
    AVDIT_CHECK(bias_in->numel() == Cout, "conv1d_transpose: bias {} for {} channels",
                bias_in->shape_str(), Cout);
    bias = f32(*bias_in);
  }
  Tensor y32 = Tensor::zeros(y.shape(), DType::F32);
  const int64_t span = std::min(L, kSpan), width = Cout * K;
  std::vector<float> xt(static_cast<size_t>(span * Cin)), cols(static_cast<size_t>(span * width));
  for (int64_t b = 0; b < B; ++b) {
    const float* xb = x.f32() + b * Cin * L;
    float* yb = y32.f32() + b * Cout * Lout;
    for (int64_t i0 = 0; i0 < L; i0 += kSpan) {
      const int64_t n = std::min(kSpan, L - i0);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t c = 0; c < Cin; ++c) xt[j * Cin + c] = xb[c * L + i0 + j];
      // cols[j, o * K + k] = sum_c x[c, i0 + j] w[c, o, k]
      sgemm_fixed(false, n, width, Cin, 1.0f, xt.data(), Cin, w.f32(), width, 0.0f, cols.data(),
                  width);
      // y[o, (i0 + j) * s + k - padding] += cols[j, o * K + k], one task per output channel.
      cpu_pool().run(Cout, [&](int64_t o) {
        float* yo = yb + o * Lout;
        for (int64_t j = 0; j < n; ++j) {
          const float* cj = cols.data() + j * width + o * K;
          const int64_t t0 = (i0 + j) * s - p.padding;
          for (int64_t k = 0; k < K; ++k) {
            const int64_t t = t0 + k;
            if (t >= 0 && t < Lout) yo[t] += cj[k];
          }
        }
      });
    }
  }
  if (bias.defined())
    for (int64_t b = 0; b < B; ++b)
      for (int64_t o = 0; o < Cout; ++o) {
        float* r = y32.f32() + (b * Cout + o) * Lout;
        const float v = bias.f32()[o];
        for (int64_t t = 0; t < Lout; ++t) r[t] += v;
      }
  store(y, y32.f32());
}

}  // namespace avdit::ops::cpu
