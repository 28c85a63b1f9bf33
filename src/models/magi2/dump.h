// The MAGI-2 forward's named points as the golden fixture's intermediates: a probe that keeps every
// fixture point (embed_pre_time, embed, rope, layers.{i}.*), on the host in float32 (router indices
// in I64, as the fixture stores them) under the fixture's names.
#pragma once

#include "core/observer.h"
#include "core/tensor.h"

namespace avdit::models::magi2 {

class DumpProbe final : public Probe {
 public:
  bool wants(const Point& p) const override;
  void on(ops::Context& ctx, const Point& p, Tensor& t) override;
  TensorMap& tensors() { return out_; }

 private:
  TensorMap out_;
};

}  // namespace avdit::models::magi2
