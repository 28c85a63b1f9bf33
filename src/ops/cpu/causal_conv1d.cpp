// The causal depthwise conv1d + SiLU on the CPU (see ops/causal_conv1d.h): float32 taps summed in
// tap order, as a direct loop (K is 4 in every model that uses it).
#include <cmath>
#include <vector>

#include "ops/causal_conv1d.h"
#include "ops/cpu/common.h"

namespace avdit::ops::cpu {

void causal_conv1d_silu(const Tensor& x_in, const Tensor& w_in, Tensor& y) {
  AVDIT_CHECK(x_in.ndim() == 2, "causal_conv1d_silu: x {} (expected [T, C])", x_in.shape_str());
  const int64_t T = x_in.size(0), C = x_in.size(1);
  const bool layout_ok = (w_in.ndim() == 2 && w_in.size(0) == C) ||
                         (w_in.ndim() == 3 && w_in.size(0) == C && w_in.size(1) == 1);
  AVDIT_CHECK(layout_ok && w_in.numel() % std::max<int64_t>(C, 1) == 0,
              "causal_conv1d_silu: weight {} for {} channels (expected [C, K] or [C, 1, K])",
              w_in.shape_str(), C);
  AVDIT_CHECK(y.numel() == T * C, "causal_conv1d_silu: output {} for x {}", y.shape_str(),
              x_in.shape_str());
  const int64_t K = C > 0 ? w_in.numel() / C : 0;
  const Tensor x = f32(x_in), w = f32(w_in);
  const float *px = x.f32(), *pw = w.f32();
  std::vector<float> out(static_cast<size_t>(T * C));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      float acc = 0.f;
      // Tap j reads token t - K + 1 + j; taps before the first token read the zero padding.
      for (int64_t j = 0; j < K; ++j) {
        const int64_t s = t - K + 1 + j;
        if (s >= 0) acc += pw[c * K + j] * px[s * C + c];
      }
      out[t * C + c] = acc / (1.f + std::exp(-acc));
    }
  }
  store(y, out.data());
}

}  // namespace avdit::ops::cpu
