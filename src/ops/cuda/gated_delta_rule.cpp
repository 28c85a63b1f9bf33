// The Gated DeltaNet ops on a CUDA context: not written yet, so the library links with CUDA on and
// a GPU run stops with a message that says what to do instead of computing something untested.
#include "ops/gated_delta_rule.h"
#include "backend/cuda/context.h"
#include "core/error.h"

namespace avdit::ops::cuda {

void delta_rule_gates(CudaContext&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                      Tensor&, Tensor&) {
  AVDIT_REQUIRE(false,
                "delta_rule_gates: the Gated DeltaNet gates are not implemented on CUDA yet (run "
                "the text encoder with --device cpu)");
}

void gated_delta_rule(CudaContext&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                      const Tensor&, Tensor&) {
  AVDIT_REQUIRE(false,
                "gated_delta_rule: the Gated DeltaNet recurrence is not implemented on CUDA yet "
                "(run the text encoder with --device cpu)");
}

}  // namespace avdit::ops::cuda
