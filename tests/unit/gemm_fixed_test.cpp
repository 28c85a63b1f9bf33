// sgemm_fixed (ops/cpu/gemm_fixed.h): correct against a float64 product at odd shapes, and the same
// bits for pools of 1 to 5 threads, which is what makes the CPU oracle's SHA-256
// machine-independent.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "ops/cpu/gemm_fixed.h"
#include "ops/linear.h"

namespace avdit::ops {
namespace {

struct Case {
  int64_t m, n, k;
  bool trans_b;
};

std::vector<float> random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

std::vector<float> run(ThreadPool& pool, const Case& c, const std::vector<float>& a,
                       const std::vector<float>& b, float beta) {
  std::vector<float> out(static_cast<size_t>(c.m * c.n), 0.5f);
  sgemm_fixed(pool, c.trans_b, c.m, c.n, c.k, 1.25f, a.data(), c.k, b.data(), c.trans_b ? c.k : c.n,
              beta, out.data(), c.n);
  return out;
}

const Case kCases[] = {{1, 1, 1, true},        {3, 5, 7, false},       {37, 515, 129, true},
                       {300, 700, 64, false},  {130, 257, 1000, true}, {1, 3456, 96, true},
                       {576, 192, 256, false}, {1025, 33, 17, true}};

TEST(GemmFixed, MatchesAFloat64Product) {
  ThreadPool pool(3);
  for (const Case& c : kCases) {
    const auto a = random(static_cast<size_t>(c.m * c.k), 1),
               b = random(static_cast<size_t>(c.k * c.n), 2);
    for (float beta : {0.f, 2.f}) {
      const auto got = run(pool, c, a, b, beta);
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double ref = 0, mag = 0;
          for (int64_t p = 0; p < c.k; ++p) {
            const double bv = c.trans_b ? b[static_cast<size_t>(j * c.k + p)]
                                        : b[static_cast<size_t>(p * c.n + j)];
            ref += static_cast<double>(a[static_cast<size_t>(i * c.k + p)]) * bv;
            mag += std::fabs(static_cast<double>(a[static_cast<size_t>(i * c.k + p)]) * bv);
          }
          ref = 1.25 * ref + beta * 0.5;
          // float32 accumulation: error within k ulps of the sum of magnitudes.
          const double tol = 1.25 * mag * c.k * 6e-8 + 1e-6;
          ASSERT_NEAR(got[static_cast<size_t>(i * c.n + j)], ref, tol)
              << c.m << "x" << c.n << "x" << c.k << " at " << i << "," << j;
        }
    }
  }
}

TEST(GemmFixed, SameBitsForAnyThreadCount) {
  ThreadPool p1(1);
  for (const Case& c : kCases) {
    const auto a = random(static_cast<size_t>(c.m * c.k), 3),
               b = random(static_cast<size_t>(c.k * c.n), 4);
    const auto ref = run(p1, c, a, b, 0.f);
    for (int threads : {2, 3, 4, 5}) {
      ThreadPool p(threads);
      const auto got = run(p, c, a, b, 0.f);
      ASSERT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0)
          << threads << " threads, " << c.m << "x" << c.n << "x" << c.k;
    }
  }
}

TEST(GemmFixed, TilesDependOnTheShapeOnly) {
  const GemmTiles small = gemm_tiles(8, 8, 8), big = gemm_tiles(4096, 4096, 4096);
  EXPECT_EQ(small.rows, 8);
  EXPECT_EQ(small.cols, 8);
  EXPECT_LT(big.rows, 4096);
  EXPECT_LT(big.cols, 4096);
}

TEST(GemmFixed, LinearUsesItAndStaysCorrect) {
  // linear's BF16 path widens blocks of weight rows; both paths agree with matmul on the CPU pool.
  const auto xv = random(70 * 48, 5), wv = random(600 * 48, 6);
  const Tensor x = Tensor::from_floats(xv, {70, 48}), w = Tensor::from_floats(wv, {600, 48});
  CpuContext ctx;
  const Tensor y = linear(ctx, x, w), yb = linear(ctx, x, w.to(DType::BF16));
  for (int64_t i = 0; i < 70; ++i)
    for (int64_t j = 0; j < 600; ++j) {
      double ref = 0;
      for (int64_t p = 0; p < 48; ++p) ref += static_cast<double>(xv[i * 48 + p]) * wv[j * 48 + p];
      ASSERT_NEAR(y.f32()[i * 600 + j], ref, 1e-4);
      ASSERT_NEAR(yb.f32()[i * 600 + j], ref, 0.15);  // bf16 weights: 8 bits of mantissa
    }
}

}  // namespace
}  // namespace avdit::ops
