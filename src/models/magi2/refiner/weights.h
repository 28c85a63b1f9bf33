// RefinerWeights: every tensor of an official MAGI-2 refiner checkpoint by its official name
// (Transformer(magi2_refiner_arch_config).state_dict(), loaded strictly: a missing, misshapen or
// unexpected tensor is BadInput), placed on an execution context as the preview's weights are: on
// the CPU mapped views, on the GPU the bf16 linears in the activation dtype and the fp32 islands
// (embedders, final linears, norms) in F32. The attention and MLP weights are the preview's
// structs, since the shared sub-layers (models/magi2/layers.h) take them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "models/magi2/refiner/config.h"
#include "models/magi2/weights.h"
#include "models/tensor_spec.h"
#include "ops/context.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::magi2::refiner {

struct RefinerLayerWeights {
  int64_t groups = 1;          // 3 in mm_layers
  AttentionWeights attention;  // sinks undefined: the refiner has none
  DenseMlpWeights mlp;
};

struct RefinerWeights {
  Tensor embedder_w[3];    // video, audio, text: [hidden, C_m]
  Tensor embedder_b;       // [3, hidden] F32
  Tensor rope_bands;       // [head_dim / 8] F32
  Tensor final_norm;       // [3, hidden] F32: video, audio, a zero row for text (rows not used)
  Tensor final_linear[2];  // video [C_v, hidden], audio [C_a, hidden]
  std::vector<RefinerLayerWeights> layers;
};

// The checkpoint's tensors, in state_dict order, with the dtypes the reference creates (bf16 for
// every BaseLinear / NativeMoELinear weight, fp32 for embedders, final linears, norms, bands).
std::vector<TensorSpec> refiner_tensor_specs(const RefinerConfig& config);

// Reads and validates every tensor (BadInput naming the tensor, the file, what was expected) and
// places it on ctx for activations in `act` (F32 or BF16). bytes: what the weights take on ctx.
RefinerWeights load_refiner_weights(ops::Context& ctx, const Checkpoint& ckpt,
                                    const RefinerConfig& config, DType act,
                                    int64_t* bytes = nullptr);

// Random weights of the same layout made on ctx (full-width benchmarks without a checkpoint):
// matrices N(0, gain / sqrt(fan_in)) by init_checkpoint's rule (models/magi2/init.h), drawn on the
// context in their final dtype; every small tensor init_checkpoint's value.
RefinerWeights random_refiner_weights(ops::Context& ctx, const RefinerConfig& config, DType act,
                                      uint64_t seed, int64_t* bytes = nullptr);

}  // namespace avdit::models::magi2::refiner
