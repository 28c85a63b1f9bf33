// The MAGI-2 preview transformer forward on a packed sequence: embedding + time overwrite, the layers (mHC around
// attention and dense MLP / MoE), final norms and linears. Optionally records every intermediate under the golden
// fixture's names (per-token tensors in packed order).
#pragma once

#include "core/tensor.h"
#include "models/magi2/packing.h"
#include "models/magi2/weights.h"

namespace avdit::models::magi2 {

struct ForwardOptions {
  bool dump = false;  // record embed_pre_time, rope, embed, layers.{i}.* (outputs and intermediates)
  // Emulated bf16 production precision (precision.h): activations rounded to bf16 where the reference's production
  // dtypes hold them (residual stream, branch activations, FA3 q/k/v/out, mHC h_*, MoE atomic adds); embedders,
  // router, norm arithmetic and the final norms/linears stay fp32. Off = the fp32 oracle.
  bool bf16_activations = false;
};

// Returns "model_output" [L, max(C_v, C_a)] (+ the dumps), per-token rows in packed order.
TensorMap forward_packed(const Magi2Weights& weights, const PackedSequence& packed, const ForwardOptions& options = {});

}  // namespace avdit::models::magi2
