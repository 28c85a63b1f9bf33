// Conv1d on the CPU: per batch row and group, the input is unfolded (im2col) a fixed span of output
// positions at a time and multiplied by the weight through sgemm_fixed, so the bits do not depend
// on the thread count and the unfolded copy stays small at any length.
#include "ops/conv1d.h"

#include <algorithm>
#include <vector>

#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"

namespace avdit::ops::cpu {
namespace {
// Output positions per GEMM: a function of nothing but this constant, so results are reproducible.
constexpr int64_t kSpan = 2048;
}  // namespace

void conv1d(const Tensor& x_in, const Tensor& w_in, const Tensor* bias_in, const Conv1dParams& p,
            Tensor& y) {
  const Tensor x = f32(x_in), w = f32(w_in);
  const int64_t B = x.size(0), Cin = x.size(1), L = x.size(2);
  const int64_t Cout = w.size(0), Cg = w.size(1), K = w.size(2), G = p.groups;
  AVDIT_CHECK(G >= 1 && Cg * G == Cin && Cout % G == 0, "conv1d: x {} with weight {} in {} groups",
              x.shape_str(), w.shape_str(), G);
  const int64_t Lout = conv1d_out_length(L, K, p);
  AVDIT_CHECK(y.ndim() == 3 && y.size(0) == B && y.size(1) == Cout && y.size(2) == Lout,
              "conv1d: output {} for x {} and weight {}", y.shape_str(), x.shape_str(),
              w.shape_str());
  Tensor bias;
  if (bias_in) {
    AVDIT_CHECK(bias_in->numel() == Cout, "conv1d: bias {} for {} channels", bias_in->shape_str(),
                Cout);
    bias = f32(*bias_in);
  }
  Tensor y32 = y.dtype() == DType::F32 ? y : Tensor::empty(y.shape(), DType::F32);
  const int64_t Og = Cout / G, rows = Cg * K;
  // A pointwise conv reads x as it is; any other unfolds it.
  const bool direct = K == 1 && p.stride == 1 && p.padding == 0;
  std::vector<float> cols(direct ? 0 : static_cast<size_t>(rows * std::min(Lout, kSpan)));
  const float* px = x.f32();
  float* py = y32.f32();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < G; ++g) {
      const float* xg = px + (b * Cin + g * Cg) * L;
      const float* wg = w.f32() + g * Og * rows;
      float* yg = py + (b * Cout + g * Og) * Lout;
      for (int64_t t0 = 0; t0 < Lout; t0 += kSpan) {
        const int64_t n = std::min(kSpan, Lout - t0);
        if (direct) {
          sgemm_fixed(false, Og, n, rows, 1.0f, wg, rows, xg + t0, L, 0.0f, yg + t0, Lout);
          continue;
        }
        // cols[c * K + k, j] = x[c, (t0 + j) * stride - padding + k * dilation] (0 outside).
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t k = 0; k < K; ++k) {
            float* row = cols.data() + (c * K + k) * n;
            const float* xc = xg + c * L;
            for (int64_t j = 0; j < n; ++j) {
              const int64_t s = (t0 + j) * p.stride - p.padding + k * p.dilation;
              row[j] = s >= 0 && s < L ? xc[s] : 0.0f;
            }
          }
        sgemm_fixed(false, Og, n, rows, 1.0f, wg, rows, cols.data(), n, 0.0f, yg + t0, Lout);
      }
    }
  if (bias.defined())
    for (int64_t b = 0; b < B; ++b)
      for (int64_t o = 0; o < Cout; ++o) {
        float* r = py + (b * Cout + o) * Lout;
        const float v = bias.f32()[o];
        for (int64_t t = 0; t < Lout; ++t) r[t] += v;
      }
  if (y32.raw() != y.raw()) store(y, y32.f32());
}

}  // namespace avdit::ops::cpu
