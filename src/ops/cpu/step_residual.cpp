// The step cache's L1 sums on the CPU (see ops/step_residual.h).
#include <cmath>

#include "ops/cpu/common.h"
#include "ops/step_residual.h"

namespace avdit::ops::cpu {
namespace {

void require_count(const Tensor& t, int64_t n, const char* what) {
  AVDIT_CHECK(t.numel() == n && dtype_is_float(t.dtype()),
              "{}: {} {} for {} elements (expected a float tensor of that size)", what,
              dtype_name(t.dtype()), t.shape_str(), n);
}

}  // namespace

L1Sums l1_sums(const Tensor& a, const Tensor& b) {
  const int64_t n = b.numel();
  require_count(a, n, "l1_sums a");
  require_count(b, n, "l1_sums b");
  const Tensor x = f32(a), y = f32(b);
  L1Sums s;
  for (int64_t i = 0; i < n; ++i) {
    s.diff += std::fabs(double(x.f32()[i]) - double(y.f32()[i]));
    s.base += std::fabs(double(y.f32()[i]));
  }
  return s;
}

}  // namespace avdit::ops::cpu
