// H3Weights: handles to every transformer tensor, taken from a Checkpoint by official name after
// validating names and shapes against h3_tensor_specs. All handles are zero-copy views of the
// memory-mapped files (see attention.h for why the grouped qkv_proj needs no regrouped copy).
#pragma once

#include <vector>

#include "core/tensor.h"
#include "models/h3/config.h"

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

// Validates the checkpoint against h3_tensor_specs(config) and returns the handles. BadInput
// names the tensor, the checkpoint and what was expected when a tensor is missing, has another
// shape or a non-float dtype. Float dtypes other than the official one (F32/BF16/F16) are
// accepted: the ops convert on the fly, so a re-saved checkpoint still loads.
H3Weights load_weights(const Checkpoint& ckpt, const H3Config& config);

}  // namespace avdit::models::h3
