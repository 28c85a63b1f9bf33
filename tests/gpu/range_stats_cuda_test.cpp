// range_stats on the GPU against the CPU, bit for bit: fresh random tensors of odd sizes in F32,
// F16 and BF16 (16-byte vector loads, scalar tails, misaligned starts, sizes past the capped grid)
// with inf and NaN planted at known rows, the empty tensor, a second run giving the same bits; and
// the range monitor on the tiny H3 golden on CUDA: every site of every call seen, maxima within
// fp32's reordering of the CPU's, the bf16 run's coverage full too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include <fmt/format.h>

#include "analysis/ranges/range_monitor.h"
#include "backend/cuda/context.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "ops/range_stats.h"
#include "testing/backend_ops.h"

namespace avdit::ops {
namespace {

using test_util::kExact;
using test_util::random_tensor;

class RangeStatsCuda : public test_util::BackendOpsTest {};

// x with a NaN at (row, 1), -inf at its last element and +inf two rows later, when they fit.
Tensor planted(Shape shape, DType dt, uint32_t seed, int64_t row) {
  Tensor x = random_tensor(shape, DType::F32, seed, 40.f);
  const int64_t width = shape.back(), rows = x.numel() / width;
  if (row < rows) x.f32()[row * width + std::min<int64_t>(1, width - 1)] = NAN;
  if (row + 2 < rows) x.f32()[(row + 2) * width] = std::numeric_limits<float>::infinity();
  if (x.numel() > 0) x.f32()[x.numel() - 1] = -std::numeric_limits<float>::infinity();
  return x.to(dt);
}

std::vector<Tensor> run_case(Context& ctx, const Tensor& x, int64_t offset) {
  // `offset` elements dropped from the front: a start that is not 16-byte aligned.
  const Tensor dev = ctx.upload(x);
  const Tensor view = offset == 0 ? dev
                                  : dev.reshape({x.numel()}).slice_rows(offset, x.numel());
  Tensor slots = ctx.zeros({3, kRangeSlotWidth}, DType::F32);
  Tensor slot = slots.slice_rows(1, 2);
  range_stats(ctx, view, slot);
  return {slots};
}

TEST_F(RangeStatsCuda, BitExactWithTheCpu) {
  uint32_t seed = 1;
  const std::vector<Shape> shapes = {{1},       {7},      {5, 3},         {33, 257}, {2, 9, 17},
                                     {1025, 3}, {4097, 1031}, {3, 1 << 20}, {0, 8}};
  for (const Shape& shape : shapes)
    for (const DType dt : {DType::F32, DType::F16, DType::BF16})
      for (const int64_t offset : {int64_t{0}, int64_t{3}}) {
        const int64_t n = shape_numel(shape);
        if (offset >= n && n > 0) continue;
        if (n == 0 && offset) continue;
        const Tensor x = planted(shape, dt, seed++, shape[0] / 2);
        check({fmt::format("range_stats {} {} offset {}", avdit::shape_str(shape), dtype_name(dt),
                           offset),
               kExact, [&](Context& ctx) { return run_case(ctx, x, offset); }});
        const Tensor clean = random_tensor(shape, dt, seed++, 3.f);
        check({fmt::format("range_stats clean {} {}", avdit::shape_str(shape), dtype_name(dt)),
               kExact, [&](Context& ctx) { return run_case(ctx, clean, 0); }});
      }
}

TEST_F(RangeStatsCuda, SameBitsOnEveryRun) {
  const Tensor x = planted({8191, 1537}, DType::F16, 99, 4000);
  const Tensor a = gpu().download(run_case(gpu(), x, 0)[0]);
  for (int k = 0; k < 3; ++k) {
    const Tensor b = gpu().download(run_case(gpu(), x, 0)[0]);
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())), 0);
  }
  EXPECT_EQ(a.f32()[kRangeSlotWidth + 2], 4000.f);
}

const std::filesystem::path kGolden = std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "h3-tiny";

analysis::ranges::RangeSummary monitored_forward(Context& ctx, DType act) {
  const Checkpoint ckpt = Checkpoint::open(kGolden);
  const models::h3::H3Model model(ctx, ckpt, act);
  analysis::ranges::RangeMonitor monitor(analysis::ranges::h3_range_sites(), 3);
  {
    const ProbeScope scope(ctx.observer(), &monitor);
    models::h3::forward_from_inputs(model, read_all(kGolden / "inputs.safetensors"), false);
  }
  return monitor.summary(ctx);
}

TEST_F(RangeStatsCuda, MonitorOnTheTinyH3CoversEverySite) {
  const auto want = monitored_forward(cpu(), DType::F32);
  const auto got = monitored_forward(gpu(), DType::F32);
  std::printf("%s\n", analysis::ranges::render_text(got).c_str());
  EXPECT_EQ(got.covered, 21);
  EXPECT_EQ(got.expected, 21);
  ASSERT_EQ(got.per_call.size(), 1u);
  for (size_t i = 0; i < want.per_call[0].max_abs.size(); ++i)
    EXPECT_NEAR(got.per_call[0].max_abs[i], want.per_call[0].max_abs[i],
                1e-4 * want.per_call[0].max_abs[i])
        << i;
  const auto bf16 = monitored_forward(gpu(), DType::BF16);
  std::printf("%s\n", analysis::ranges::render_text(bf16).c_str());
  EXPECT_TRUE(bf16.full());
  EXPECT_EQ(bf16.nonfinite, 0);
  EXPECT_NEAR(bf16.max_abs, want.max_abs, 0.05 * want.max_abs);
}

}  // namespace
}  // namespace avdit::ops
