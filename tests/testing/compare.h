// Shared test helper: the error measure every parity test reports, max |got - want| / max |want|,
// printed with its name so test logs carry the figures the notes quote.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

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

}  // namespace avdit::test_util
