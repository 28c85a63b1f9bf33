// H3Weights: every transformer tensor by its official name, validated against h3_tensor_specs and
// placed on an execution context: on the CPU zero-copy views of the memory-mapped files (the ops
// widen them on the fly); on the GPU uploaded in the activation dtype, the reference's fp32 islands
// (patch projections, time embedder, output heads) in F32. The grouped qkv_proj is used as stored.
#pragma once

#include <vector>

#include <cstdint>
#include <functional>
#include <string>

#include "core/tensor.h"
#include "models/h3/config.h"
#include "ops/context.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::h3 {

// Attention + SwiGLU MLP + the two RMSNorms; the same tensors in refiner and DiT blocks.
struct BlockWeights {
  Tensor norm1;         // [H]
  Tensor norm2;         // [H]
  Tensor qkv_proj;      // [3 I, H], rows grouped per head (q_h, k_h, v_h), as stored
  Tensor q_norm;        // [dh]
  Tensor k_norm;        // [dh]
  Tensor out_proj;      // [H, I]
  Tensor fc1;           // [2 F, H]: [gate; up]
  Tensor fc2;           // [H, F]
  Tensor adaln_weight;  // [18 H, Dt] (DiT blocks only; undefined in refiner blocks)
  Tensor adaln_bias;    // [18 H]
};

struct H3Weights {
  Tensor video_patch_proj_weight;  // [H, 96] F32
  Tensor video_patch_proj_bias;    // [H]
  Tensor audio_patch_proj_weight;  // [H, 32] F32
  Tensor audio_patch_proj_bias;    // [H]
  Tensor condition_proj_weight;    // [H, text_dim]
  Tensor condition_proj_bias;      // [H]
  // Full variant: time_embedder.*; curve variant: adaln_t_table [grid, Dt].
  Tensor time_proj_in_weight;   // [Dth, 256]
  Tensor time_proj_in_bias;     // [Dth]
  Tensor time_proj_out_weight;  // [Dt, Dth]
  Tensor time_proj_out_bias;    // [Dt]
  Tensor adaln_t_table;         // [grid, Dt]
  Tensor rope_inv_freq;         // [16] F32
  std::vector<BlockWeights> refiner_blocks;
  Tensor refiner_final_norm;  // [H]
  std::vector<BlockWeights> blocks;
  Tensor final_norm;          // [H]
  Tensor final_adaln_weight;  // [2 H, Dt]
  Tensor final_adaln_bias;    // [2 H]
  Tensor video_out_weight;    // [96, H] F32
  Tensor video_out_bias;      // [96]
  Tensor audio_out_weight;    // [32, H] F32
  Tensor audio_out_bias;      // [32]
};

// Whether the reference keeps this tensor in float32 in its bf16 model (patch projections, time
// embedder, output heads, rope.inv_freq, adaln_t_table).
bool is_fp32_island(const std::string& name);

// Validates the checkpoint against h3_tensor_specs(config) and places every tensor on ctx (see
// above). BadInput names the tensor, the checkpoint and what was expected when a tensor is missing,
// has another shape or a non-float dtype. Float dtypes other than the official one (F32/BF16/F16)
// are accepted. bytes (optional) receives the bytes the weights take on ctx (0 on the CPU: mapped).
// With adaln false, the blocks' and the final layer's adaLN projections (is_adaln_projection) are
// left undefined: a model whose modulation comes from a timestep table never reads them.
H3Weights load_weights(ops::Context& ctx, const Checkpoint& ckpt, const H3Config& config, DType act,
                       int64_t* bytes = nullptr, bool adaln = true);

// The adaLN projections: blocks.{i}.adaln_proj.linear.* and final_layer.adaln_proj.linear.*.
bool is_adaln_projection(const std::string& name);

// Random weights with the golden README's scales (init_checkpoint's rule), made on ctx in the
// dtypes load_weights gives (value i of a tensor depends only on (seed, name, i)). The full
// (time_embedder) variant. With adaln false the adaLN projections are left undefined, as
// load_weights leaves them.
H3Weights random_weights(ops::Context& ctx, const H3Config& config, DType act, uint64_t seed,
                         int64_t* bytes = nullptr, bool adaln = true);

// The one tensor `name` of random_weights (the same values and dtype), made on ctx: a table built
// from random weights draws each adaLN projection when it needs it.
Tensor random_weight(ops::Context& ctx, const H3Config& config, DType act, uint64_t seed,
                     const std::string& name);

// rope.inv_freq as the reference builds it: 1 / 10000^(arange(0, 2L, 2) / 2L) in float32, [len].
Tensor rope_inv_freq(int64_t len);

// (mean, std) of the random weights of one tensor (the golden README's rule).
std::pair<float, float> init_scale(const std::string& name, const Shape& shape,
                                   const H3Config& config);

}  // namespace avdit::models::h3
