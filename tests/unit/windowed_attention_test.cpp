// The windowed attention op's CPU reference against a brute-force float64 computation over the
// dense mask its range list implies, on fresh random range lists at small odd sizes (GQA, partly
// overlapping query ranges, uncovered queries, the gate, the log-sum-exp); and the plan's refusals
// (a pair covered twice, a range outside the sequence).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "ops/context.h"
#include "ops/windowed_attention.h"
#include "testing/random_ranges.h"

namespace avdit::ops {
namespace {

Tensor random(Shape shape, std::mt19937& rng) {
  Tensor t = Tensor::empty(shape, DType::F32);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
  return t;
}

std::vector<RangePair> random_rows(int64_t S, int64_t Sk, int n, std::mt19937& rng) {
  return testing::random_range_rows(S, Sk, n, rng);
}

struct Dense {
  std::vector<double> out, lse;  // [S, Hq, D], [S, Hq]
};

// softmax over the keys some row grants, in float64.
Dense dense_reference(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                      const std::vector<RangePair>& rows) {
  const int64_t S = q.size(0), Hq = q.size(1), D = q.size(2), Sk = k.size(0), Hkv = k.size(1);
  std::vector<std::vector<uint8_t>> mask(S, std::vector<uint8_t>(Sk, 0));
  for (const RangePair& r : rows)
    for (int64_t i = r.q.begin; i < r.q.end; ++i)
      for (int64_t j = r.k.begin; j < r.k.end; ++j) mask[i][j] = 1;
  Dense d;
  d.out.assign(S * Hq * D, 0.0);
  d.lse.assign(S * Hq, -std::numeric_limits<double>::infinity());
  for (int64_t i = 0; i < S; ++i)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / (Hq / Hkv);
      std::vector<double> logit(Sk, 0.0);
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < Sk; ++j) {
        if (!mask[i][j]) continue;
        double dot = 0;
        for (int64_t e = 0; e < D; ++e)
          dot += double(q.f32()[(i * Hq + h) * D + e]) * k.f32()[(j * Hkv + kh) * D + e];
        logit[j] = dot * scale;
        mx = std::max(mx, logit[j]);
      }
      if (!std::isfinite(mx)) continue;
      double sum = 0;
      for (int64_t j = 0; j < Sk; ++j)
        if (mask[i][j]) sum += std::exp(logit[j] - mx);
      d.lse[i * Hq + h] = mx + std::log(sum);
      for (int64_t j = 0; j < Sk; ++j) {
        if (!mask[i][j]) continue;
        const double p = std::exp(logit[j] - mx) / sum;
        for (int64_t e = 0; e < D; ++e)
          d.out[(i * Hq + h) * D + e] += p * v.f32()[(j * Hkv + kh) * D + e];
      }
    }
  return d;
}

double max_rel(const Tensor& got, const std::vector<double>& want) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(want[i])) {
      EXPECT_EQ(got.f32()[i], static_cast<float>(want[i])) << "element " << i;
      continue;
    }
    diff = std::max(diff, std::fabs(got.f32()[i] - want[i]));
    ref = std::max(ref, std::fabs(want[i]));
  }
  return ref > 0 ? diff / ref : diff;
}

struct Case {
  int64_t S, Sk, Hq, Hkv, D;
  int rows;
};

TEST(WindowedAttention, MatchesDenseMaskFloat64) {
  CpuContext ctx;
  std::mt19937 rng(20261129);
  for (const Case& c : {Case{37, 37, 6, 2, 19, 12}, Case{53, 41, 4, 4, 8, 20},
                        Case{29, 67, 9, 3, 33, 30}, Case{1, 5, 2, 1, 3, 2}}) {
    const std::vector<RangePair> rows = random_rows(c.S, c.Sk, c.rows, rng);
    ASSERT_FALSE(rows.empty());
    const Tensor q = random({c.S, c.Hq, c.D}, rng), k = random({c.Sk, c.Hkv, c.D}, rng),
                 v = random({c.Sk, c.Hkv, c.D}, rng);
    const float scale = 1.f / std::sqrt(static_cast<float>(c.D));
    const WindowPlan plan = plan_window(ctx, rows, c.S, c.Sk);
    Tensor lse = Tensor::empty({c.S, c.Hq}, DType::F32);
    const Tensor out = windowed_attention(ctx, q, k, v, scale, plan, nullptr, DType::F32, &lse);
    const Dense want = dense_reference(q, k, v, scale, rows);
    const double e_out = max_rel(out, want.out), e_lse = max_rel(lse, want.lse);
    std::printf("S %ld Sk %ld Hq %ld Hkv %ld D %ld, %zu rows -> %zu segments: out %.3g lse %.3g\n",
                c.S, c.Sk, c.Hq, c.Hkv, c.D, rows.size(), plan.segments.size(), e_out, e_lse);
    EXPECT_LE(e_out, 2e-6);
    EXPECT_LE(e_lse, 2e-6);
    // The plan's pair count is the mask's.
    int64_t pairs = 0;
    for (const RangePair& r : rows) pairs += r.q.size() * r.k.size();
    EXPECT_EQ(plan.pairs, pairs);

    // The gate: sigmoid(gate[s, h]) times the core.
    const Tensor gate = random({c.S, c.Hq}, rng);
    const Tensor gated = windowed_attention(ctx, q, k, v, scale, plan, &gate);
    std::vector<double> want_gated = want.out;
    for (int64_t i = 0; i < c.S * c.Hq; ++i)
      for (int64_t e = 0; e < c.D; ++e)
        want_gated[i * c.D + e] *= 1.0 / (1.0 + std::exp(-double(gate.f32()[i])));
    EXPECT_LE(max_rel(gated, want_gated), 2e-6);
  }
}

TEST(WindowedAttention, UncoveredQueriesGetZeroAndMinusInfinity) {
  CpuContext ctx;
  std::mt19937 rng(7);
  const Tensor q = random({9, 2, 5}, rng), k = random({11, 1, 5}, rng), v = random({11, 1, 5}, rng);
  // Queries [3, 6) are in no row; [0, 3) see two key ranges that touch (joined into one).
  const std::vector<RangePair> rows = {{{0, 3}, {0, 4}}, {{6, 9}, {2, 11}}, {{0, 3}, {4, 7}}};
  const WindowPlan plan = plan_window(ctx, rows, 9, 11);
  ASSERT_EQ(plan.segments.size(), 2u);
  EXPECT_EQ(plan.keys[0], (Range{0, 7}));
  EXPECT_EQ(plan.max_keys, 9);
  Tensor lse = Tensor::empty({9, 2}, DType::F32);
  const Tensor out = windowed_attention(ctx, q, k, v, 0.4f, plan, nullptr, DType::F32, &lse);
  for (int64_t i = 3 * 2 * 5; i < 6 * 2 * 5; ++i) EXPECT_EQ(out.f32()[i], 0.f);
  for (int64_t i = 3 * 2; i < 6 * 2; ++i) EXPECT_TRUE(std::isinf(lse.f32()[i]) && lse.f32()[i] < 0);
  EXPECT_LE(max_rel(out, dense_reference(q, k, v, 0.4f, rows).out), 2e-6);
}

TEST(WindowedAttention, RefusesPairsCoveredTwiceAndRangesOutside) {
  CpuContext ctx;
  // Rows [0, 4) x [0, 5) and [2, 6) x [4, 8) share queries [2, 4) x key 4.
  EXPECT_THROW(plan_window(ctx, {{{0, 4}, {0, 5}}, {{2, 6}, {4, 8}}}, 8, 8), BadInput);
  EXPECT_THROW(plan_window(ctx, {{{0, 4}, {0, 5}}, {{0, 4}, {0, 5}}}, 8, 8), BadInput);
  EXPECT_THROW(plan_window(ctx, {{{0, 9}, {0, 5}}}, 8, 8), BadInput);
  EXPECT_THROW(plan_window(ctx, {{{3, 2}, {0, 5}}}, 8, 8), BadInput);
  EXPECT_THROW(plan_window(ctx, {{{0, 2}, {-1, 5}}}, 8, 8), BadInput);
  // Disjoint keys of the same queries are fine.
  EXPECT_NO_THROW(plan_window(ctx, {{{0, 4}, {0, 4}}, {{2, 6}, {4, 8}}}, 8, 8));
  // Shapes that do not fit the plan.
  const WindowPlan plan = plan_window(ctx, {{{0, 4}, {0, 4}}}, 8, 8);
  const Tensor q = Tensor::zeros({7, 2, 4}, DType::F32), k = Tensor::zeros({8, 1, 4}, DType::F32);
  EXPECT_THROW(windowed_attention(ctx, q, k, k, 1.f, plan), BadInput);
}

TEST(WindowedAttention, MergeRangesGroupsSortedRows) {
  const std::vector<RangePair> rows = {
      {{4, 8}, {0, 1}}, {{0, 4}, {1, 2}}, {{4, 8}, {2, 3}}, {{0, 4}, {3, 4}}};
  const MergedRanges m = merge_ranges(rows);
  ASSERT_EQ(m.q.size(), 2u);
  EXPECT_EQ(m.q[0], (Range{0, 4}));
  EXPECT_EQ(m.q[1], (Range{4, 8}));
  EXPECT_EQ(m.offsets, (std::vector<int64_t>{0, 2, 4}));
  // Stable: within a group the rows keep their order.
  EXPECT_EQ(m.sorted[0].k, (Range{1, 2}));
  EXPECT_EQ(m.sorted[1].k, (Range{3, 4}));
  EXPECT_EQ(m.sorted[2].k, (Range{0, 1}));
}

}  // namespace
}  // namespace avdit::ops
