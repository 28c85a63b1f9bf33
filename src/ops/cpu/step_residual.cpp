// Step-cache residual arithmetic on the CPU (see ops/step_residual.h).
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

void residual_sub(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = out.numel();
  require_count(a, n, "residual_sub a");
  require_count(b, n, "residual_sub b");
  AVDIT_CHECK(out.dtype() == DType::F32, "residual_sub: the residual is F32, found {}",
              dtype_name(out.dtype()));
  const Tensor x = f32(a), y = f32(b);
  float* o = out.f32();
  for (int64_t i = 0; i < n; ++i) o[i] = x.f32()[i] - y.f32()[i];
}

void residual_add(const Tensor& a, const Tensor& r, Tensor& out) {
  const int64_t n = out.numel();
  require_count(a, n, "residual_add a");
  AVDIT_CHECK(r.numel() == n && r.dtype() == DType::F32,
              "residual_add: residual {} {}, expected F32 of {}", dtype_name(r.dtype()),
              r.shape_str(), n);
  const Tensor x = f32(a);
  Tensor sum = Tensor::empty(out.shape(), DType::F32);
  for (int64_t i = 0; i < n; ++i) sum.f32()[i] = x.f32()[i] + r.f32()[i];
  store(out, sum.f32());
}

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
