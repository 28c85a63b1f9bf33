// The H3 forward's named points as the golden fixture's intermediates: a probe that keeps what the
// fixture has (block 0's internals, every hidden_block{i}, the refiner's, the final layer's), on
// the host in float32 under the fixture's names, with the fixture's layouts (the qkv regrouped as
// Q_all | K_all | V_all, the adaLN slices cut out of their tables).
#pragma once

#include "core/observer.h"
#include "core/tensor.h"
#include "models/h3/config.h"

namespace avdit::models::h3 {

class DumpProbe final : public Probe {
 public:
  explicit DumpProbe(const H3Config& config) : config_(config) {}
  bool wants(const Point& p) const override;
  void on(ops::Context& ctx, const Point& p, Tensor& t) override;
  TensorMap& tensors() { return out_; }

 private:
  H3Config config_;
  TensorMap out_;
};

}  // namespace avdit::models::h3
