// relu on the CPU (exact: a comparison, no rounding beyond the output dtype).
#include <vector>

#include "ops/cpu/common.h"
#include "ops/relu.h"

namespace avdit::ops::cpu {

void relu(const Tensor& x_in, Tensor& y) {
  AVDIT_CHECK(y.numel() == x_in.numel(), "relu: output {} for x {}", y.shape_str(),
              x_in.shape_str());
  const Tensor x = f32(x_in);
  const float* px = x.f32();
  std::vector<float> out(static_cast<size_t>(x.numel()));
  // NaN stays NaN (as torch's relu), so a poisoned activation is not silently zeroed.
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = px[i] < 0.f ? 0.f : px[i];
  store(y, out.data());
}

}  // namespace avdit::ops::cpu
