// Shared test helper: the error measure every parity test reports, max |got - want| / max |want|,
// printed with its name so test logs carry the figures the notes quote.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "core/tensor.h"

namespace avdit::test_util {

// Compares element by element in float64 (shapes may differ if the element counts agree, e.g. a
// packed row layout against the same values unpacked). Returns 1e30 on a count mismatch.
inline double rel_max_diff(const Tensor& got, const Tensor& want, const std::string& what) {
  EXPECT_EQ(got.numel(), want.numel()) << what;
  if (got.numel() != want.numel()) return 1e30;
  const Tensor x = got.to_f32(), y = want.to_f32();
  const float *px = x.f32(), *py = y.f32();
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(px[i]) - py[i]));
    ref = std::max(ref, std::fabs(static_cast<double>(py[i])));
  }
  const double rel = ref > 0 ? diff / ref : diff;
  std::printf("  %-30s max abs %.3e  of max %.3e\n", what.c_str(), diff, rel);
  return rel;
}

// Same dtype, shape and bytes.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

// Router outputs [.., K]: the number of (token, head) rows whose chosen expert SET differs (the
// order within a row may differ on exact ties).
inline int64_t routing_flips(const Tensor& got, const Tensor& want) {
  const int64_t K = want.size(-1), rows = want.numel() / K;
  const Tensor g = got.to(DType::I64), w = want.to(DType::I64);
  const int64_t *pg = std::as_const(g).data<int64_t>(), *pw = std::as_const(w).data<int64_t>();
  int64_t flips = 0;
  for (int64_t r = 0; r < rows; ++r)
    flips += std::set<int64_t>(pg + r * K, pg + (r + 1) * K) !=
             std::set<int64_t>(pw + r * K, pw + (r + 1) * K);
  return flips;
}

struct MaxDiff {
  double max_abs = 0, max_ref = 0;
  double rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
};

// Top-k weights compared as per-(token, head) maps expert -> weight (gi/gw: got indices and
// weights, wi/ww: wanted), so a different order within k on exact ties does not count; an expert
// missing from `got` is a routing flip, counted by routing_flips, not here.
inline MaxDiff topk_weight_diff(const Tensor& gi, const Tensor& gw, const Tensor& wi,
                                const Tensor& ww) {
  const int64_t K = wi.size(-1), rows = wi.numel() / K;
  const Tensor gi64 = gi.to(DType::I64), wi64 = wi.to(DType::I64), gw32 = gw.to_f32(),
               ww32 = ww.to_f32();
  const int64_t *pgi = std::as_const(gi64).data<int64_t>(),
                *pwi = std::as_const(wi64).data<int64_t>();
  const float *pgw = std::as_const(gw32).f32(), *pww = std::as_const(ww32).f32();
  MaxDiff d;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const float ref = pww[r * K + k];
      d.max_ref = std::max(d.max_ref, static_cast<double>(std::fabs(ref)));
      for (int64_t j = 0; j < K; ++j)
        if (pgi[r * K + j] == pwi[r * K + k])
          d.max_abs = std::max(d.max_abs, static_cast<double>(std::fabs(pgw[r * K + j] - ref)));
    }
  return d;
}

}  // namespace avdit::test_util
