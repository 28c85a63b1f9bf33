// The step cache's arithmetic, CPU (the oracle) against CUDA on fresh random inputs at odd sizes
// and every float dtype: the residual (the element-wise Sub into F32) and its reuse (Add back into
// the stored dtype, mixed operands) bit-exact, the L1
// sums within float64 summation order, and the same sums on a second GPU run (skip decisions read
// them).
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "backend/cuda/context.h"
#include "ops/activation.h"
#include "ops/step_residual.h"
#include "testing/backend_ops.h"

namespace avdit::ops {
namespace {

using test_util::kExact;
using test_util::OpCase;
using test_util::random_tensor;

class StepResidualCuda : public test_util::BackendOpsTest {};

TEST_F(StepResidualCuda, ResidualAndReuseBitExact) {
  uint32_t seed = 1;
  for (const int64_t n : {1, 255, 257, 4099, 1 << 20})
    for (const DType dt : {DType::F32, DType::BF16, DType::F16}) {
      const Tensor a = random_tensor({n}, dt, seed++), b = random_tensor({n}, dt, seed++);
      check({fmt::format("residual Sub + Add n={} {}", n, dtype_name(dt)), kExact,
             [&](Context& ctx) -> std::vector<Tensor> {
               Tensor r = ctx.empty({n}, DType::F32), back = ctx.empty({n}, dt);
               binary_into(ctx, Binary::Sub, ctx.upload(a), ctx.upload(b), r);
               binary_into(ctx, Binary::Add, ctx.upload(b), r, back);
               return {r, back};
             }});
    }
}

TEST_F(StepResidualCuda, L1SumsMatchTheCpuAndRepeat) {
  uint32_t seed = 100;
  for (const int64_t n : {1, 300, 65537, 3 << 20})
    for (const DType dt : {DType::F32, DType::BF16}) {
      const Tensor a = random_tensor({n}, dt, seed++), b = random_tensor({n}, dt, seed++);
      const L1Sums want = l1_sums(cpu(), a, b);
      const Tensor ga = gpu().upload(a), gb = gpu().upload(b);
      const L1Sums got = l1_sums(gpu(), ga, gb), again = l1_sums(gpu(), ga, gb);
      EXPECT_NEAR(got.diff, want.diff, 1e-12 * want.diff) << n;
      EXPECT_NEAR(got.base, want.base, 1e-12 * want.base) << n;
      EXPECT_EQ(got.diff, again.diff) << n;
      EXPECT_EQ(got.base, again.base) << n;
    }
}

}  // namespace
}  // namespace avdit::ops
