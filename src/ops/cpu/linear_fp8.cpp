// The FP8 linear on the CPU (see ops/linear_fp8.h): e4m3 values decoded to fp32 and multiplied by
// the CPU GEMM (products of e4m3 values are exact in fp32), then multiplied by the inverse scales.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "ops/cpu/common.h"
#include "ops/linear.h"
#include "ops/linear_fp8.h"

namespace avdit::ops {
namespace {

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> v{};
    for (int i = 0; i < 256; ++i) v[i] = e4m3_to_f32(static_cast<uint8_t>(i));
    return v;
  }();
  return t;
}

}  // namespace

float fp8_scale(const float* x, int64_t n) {
  float amax = 0.f;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(x[i])) amax = std::max(amax, std::fabs(x[i]));
  return amax > 0.f ? kE4m3Max / amax : 1.f;
}

Fp8Scaling parse_fp8_scaling(const std::string& s, const char* what) {
  AVDIT_REQUIRE(s == "tensor" || s == "row",
                "{} {}: expected tensor (one scale per matrix) or row (per token "
                "and per output channel)",
                what, s);
  return s == "row" ? Fp8Scaling::Row : Fp8Scaling::Tensor;
}

namespace cpu {

Fp8Weight quantize_fp8(const Tensor& w_any, Fp8Scaling scaling) {
  AVDIT_REQUIRE(w_any.ndim() == 2, "FP8 weight: expected [N, K], found {}", w_any.shape_str());
  const Tensor w = f32(w_any);
  const int64_t N = w.size(0), K = w.size(1), S = scaling == Fp8Scaling::Row ? N : 1;
  Fp8Weight q;
  q.scaling = scaling;
  q.scales = Tensor::empty({S}, DType::F32);
  q.dequant = Tensor::empty({S}, DType::F32);
  for (int64_t i = 0; i < S; ++i) {
    q.scales.f32()[i] = S == 1 ? fp8_scale(w.f32(), w.numel()) : fp8_scale(w.f32() + i * K, K);
    q.dequant.f32()[i] = 1.f / q.scales.f32()[i];
  }
  q.codes = Tensor::empty(w.shape(), DType::F8_E4M3);
  uint8_t* c = q.codes.data<uint8_t>();
  for (int64_t n = 0; n < N; ++n) {
    const float sw = q.scales.f32()[S == 1 ? 0 : n];
    for (int64_t k = 0; k < K; ++k) c[n * K + k] = f32_to_e4m3(w.f32()[n * K + k] * sw);
  }
  return q;
}

void linear_fp8(const Tensor& x_in, const Fp8Weight& w, Tensor& y) {
  AVDIT_CHECK(w.codes.ndim() == 2 && w.codes.dtype() == DType::F8_E4M3,
              "linear_fp8: weight codes {} {}", dtype_name(w.codes.dtype()), w.codes.shape_str());
  const int64_t N = w.codes.size(0), K = w.codes.size(1);
  AVDIT_CHECK(x_in.ndim() >= 1 && x_in.size(-1) == K && y.numel() == x_in.numel() / K * N,
              "linear_fp8: x {} y {} for a weight [{}, {}]", x_in.shape_str(), y.shape_str(), N, K);
  const auto& lut = e4m3_table();
  const bool row = w.scaling == Fp8Scaling::Row;
  AVDIT_CHECK(w.dequant.numel() == (row ? N : 1) && w.dequant.dtype() == DType::F32,
              "linear_fp8: {} weight scales for {} rows", w.dequant.numel(), N);
  const Tensor x = f32(x_in);
  const int64_t M = x.numel() / K;
  std::vector<float> sx(row ? M : 1);
  if (row)
    for (int64_t m = 0; m < M; ++m) sx[m] = fp8_scale(x.f32() + m * K, K);
  else
    sx[0] = fp8_scale(x.f32(), x.numel());
  Tensor xq = Tensor::empty({M, K}, DType::F32);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k)
      xq.f32()[m * K + k] = lut[f32_to_e4m3(x.f32()[m * K + k] * sx[row ? m : 0])];
  Tensor wq = Tensor::empty({N, K}, DType::F32);
  const uint8_t* c = w.codes.data<uint8_t>();
  for (int64_t i = 0; i < N * K; ++i) wq.f32()[i] = lut[c[i]];
  Tensor acc = Tensor::empty({M, N}, DType::F32);
  linear(xq, wq, nullptr, nullptr, acc);
  const float* dw = w.dequant.f32();
  for (int64_t m = 0; m < M; ++m) {
    const float dx = 1.f / sx[row ? m : 0];
    for (int64_t n = 0; n < N; ++n) acc.f32()[m * N + n] *= dx * dw[row ? n : 0];
  }
  store(y, acc.f32());
}

}  // namespace cpu

}  // namespace avdit::ops
