// What the golden tests of every network share: the error measure the goldens' READMEs state
// their bars in, and a probe that keeps every observer point of a forward or decode.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include <string>

#include "core/error.h"
#include "core/observer.h"
#include "core/tensor.h"
#include "ops/context.h"

namespace avdit::testing {

// max |got - want| / max |want| (max |got - want| when want is all zeros), over the same number
// of elements.
inline double golden_rel_err(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(DType::F64), w = want.to(DType::F64);
  EXPECT_EQ(g.numel(), w.numel());
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < std::min(g.numel(), w.numel()); ++i) {
    diff = std::max(diff, std::fabs(g.data<double>()[i] - w.data<double>()[i]));
    ref = std::max(ref, std::fabs(w.data<double>()[i]));
  }
  return ref > 0 ? diff / ref : diff;
}

// case{c}.input_ids [1, T] (int64) of a text encoder golden, as the encoders take them.
inline std::vector<int32_t> case_ids(const TensorMap& inputs, int c) {
  const Tensor t = inputs.at("case" + std::to_string(c) + ".input_ids").to(DType::I64);
  std::vector<int32_t> ids(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) ids[i] = static_cast<int32_t>(t.data<int64_t>()[i]);
  return ids;
}

// The cosine of two tensors taken as vectors (float64 sums): the bf16 bars' second number.
inline double golden_cosine(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(DType::F64), w = want.to(DType::F64);
  EXPECT_EQ(g.numel(), w.numel());
  double gw = 0, gg = 0, ww = 0;
  for (int64_t i = 0; i < std::min(g.numel(), w.numel()); ++i) {
    gw += g.data<double>()[i] * w.data<double>()[i];
    gg += g.data<double>()[i] * g.data<double>()[i];
    ww += w.data<double>()[i] * w.data<double>()[i];
  }
  return gw / std::sqrt(gg * ww);
}

// Every named point, copied to the host in F32 (values updated in place after their point, as the
// residual, are cloned).
class CapturePoints final : public Probe {
 public:
  bool wants(const Point&) const override { return true; }
  void on(ops::Context& ctx, const Point& p, Tensor& t) override {
    got[p.str()] = ctx.download(t).to(DType::F32).clone();
  }
  TensorMap got;
};

}  // namespace avdit::testing
