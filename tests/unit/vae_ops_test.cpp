// The ops the ViT VAE decoders added (layer_norm, copy_window, blend_rows) on the CPU against
// float64 computations written from their definitions, at odd sizes, with and without affine
// parameters, in F32 and with BF16 storage.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "ops/context.h"
#include "ops/layer_norm.h"
#include "ops/window.h"

namespace avdit::ops {
namespace {

Tensor random(Shape shape, uint32_t seed, float mean = 0.f, float std = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, std);
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
  return t;
}

double max_rel(const Tensor& got, const std::vector<double>& want) {
  const Tensor g = got.to_f32();
  double diff = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(g.f32()[i] - want[i]));
    ref = std::max(ref, std::fabs(want[i]));
  }
  return ref > 0 ? diff / ref : diff;  // an all-zero reference (D = 1, no bias): absolute
}

TEST(VaeOps, LayerNormMatchesFloat64) {
  CpuContext ctx;
  for (const auto& [rows, D] : {std::pair<int64_t, int64_t>{7, 33}, {1, 1}, {5, 2048}, {13, 97}}) {
    // A large mean beside a small spread: the centring must happen before the squares.
    const Tensor x = random({rows, D}, 1, 3.f, 0.5f);
    const Tensor w = random({D}, 2, 1.f, 0.1f), b = random({D}, 3, 0.f, 0.05f);
    for (const bool affine : {true, false}) {
      std::vector<double> want(static_cast<size_t>(rows * D));
      for (int64_t r = 0; r < rows; ++r) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < D; ++i) m += x.f32()[r * D + i];
        m /= D;
        for (int64_t i = 0; i < D; ++i) v += std::pow(x.f32()[r * D + i] - m, 2);
        v /= D;
        for (int64_t i = 0; i < D; ++i) {
          double y = (x.f32()[r * D + i] - m) / std::sqrt(v + 1e-5);
          if (affine) y = y * w.f32()[i] + b.f32()[i];
          want[static_cast<size_t>(r * D + i)] = y;
        }
      }
      const Tensor y = layer_norm(ctx, x, affine ? &w : nullptr, affine ? &b : nullptr, 1e-5f);
      EXPECT_LE(max_rel(y, want), 1e-6) << rows << "x" << D << " affine " << affine;
      const Tensor y16 =
          layer_norm(ctx, x, affine ? &w : nullptr, affine ? &b : nullptr, 1e-5f, DType::BF16);
      EXPECT_EQ(y16.dtype(), DType::BF16);
      EXPECT_LE(max_rel(y16, want), 8e-3) << rows << "x" << D << " bf16";
    }
  }
}

TEST(VaeOps, CopyWindowMovesExactlyTheWindow) {
  CpuContext ctx;
  const Tensor src = random({3, 11, 13}, 4);
  Tensor dst = Tensor::zeros({3, 17, 7}, DType::F32);
  const Window win{2, 5, 9, 6};
  copy_window(ctx, src, win, dst, 8, 1);
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t r = 0; r < 17; ++r)
      for (int64_t c = 0; c < 7; ++c) {
        const bool in = r >= 8 && r < 17 && c >= 1 && c < 7;
        const float want = in ? src.f32()[(o * 11 + win.row + r - 8) * 13 + win.col + c - 1] : 0.f;
        ASSERT_EQ(dst.f32()[(o * 17 + r) * 7 + c], want) << o << " " << r << " " << c;
      }
  // Into BF16: each value rounded once.
  Tensor d16 = Tensor::zeros({3, 9, 6}, DType::BF16);
  copy_window(ctx, src, win, d16, 0, 0);
  EXPECT_EQ(d16.to_f32().f32()[0],
            Tensor::from_floats({src.f32()[2 * 13 + 5]}, {1}).to(DType::BF16).to_f32().f32()[0]);
  Tensor small = Tensor::zeros({3, 4, 4}, DType::F32);
  EXPECT_THROW(copy_window(ctx, src, win, small, 0, 0), BadInput);
  EXPECT_THROW(copy_window(ctx, src, Window{5, 0, 7, 13}, dst, 0, 0), BadInput);
}

TEST(VaeOps, BlendRowsCrossFadesAsTorch) {
  CpuContext ctx;
  for (const auto& [P, C, E] :
       {std::tuple<int64_t, int64_t, int64_t>{3, 1, 5}, {2, 19, 7}, {5, 3, 1}}) {
    const int64_t Ra = E + 3, Rb = E + 4, a_row = 3, b_row = 2;
    const Tensor a = random({P, Ra, C}, 5);
    const Tensor b0 = random({P, Rb, C}, 6);
    Tensor b = b0.clone();
    blend_rows(ctx, a, a_row, b, b_row, E);
    std::vector<double> want(static_cast<size_t>(b.numel()));
    for (int64_t o = 0; o < P; ++o)
      for (int64_t r = 0; r < Rb; ++r)
        for (int64_t c = 0; c < C; ++c) {
          const int64_t i = (o * Rb + r) * C + c, k = r - b_row;
          double v = b0.f32()[i];
          if (k >= 0 && k < E) {
            const double wb = static_cast<double>(k) / E;
            v = a.f32()[(o * Ra + a_row + k) * C + c] * (1 - wb) + v * wb;
          }
          want[static_cast<size_t>(i)] = v;
        }
    EXPECT_LE(max_rel(b, want), 3e-7) << P << " " << C << " " << E;
    // k = 0 takes a exactly; rows outside the extent are untouched.
    EXPECT_EQ(b.f32()[b_row * C], a.f32()[a_row * C]);
    EXPECT_EQ(b.f32()[0], b0.f32()[0]);
  }
  Tensor b = random({2, 4, 3}, 7);
  EXPECT_THROW(blend_rows(ctx, random({2, 4, 5}, 8), 0, b, 0, 2), BadInput);
  EXPECT_THROW(blend_rows(ctx, random({2, 4, 3}, 8), 3, b, 0, 2), BadInput);
}

}  // namespace
}  // namespace avdit::ops
