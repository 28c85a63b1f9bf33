// The Qwen3-VL language model's weights by official name (`model.language_model.*`), for the
// first `selected_layers` decoder layers only: the layers past it, the final norm, lm_head and the
// vision tower are never read. On the CPU the tensors are zero-copy views of the memory-mapped
// bf16 files (the ops widen them block by block); on the GPU they are uploaded in the activation
// dtype. The embedding table stays on the host: a prompt's rows are gathered there.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "models/text/qwen3vl/config.h"

namespace avdit {
class Checkpoint;
}
namespace avdit::ops {
class Context;
}

namespace avdit::models::text::qwen3vl {

inline constexpr const char* kPrefix = "model.language_model.";

struct DecoderLayerWeights {
  Tensor input_layernorm;           // [hidden]
  Tensor q_proj;                    // [heads * head_dim, hidden]
  Tensor k_proj;                    // [kv_heads * head_dim, hidden]
  Tensor v_proj;                    // [kv_heads * head_dim, hidden]
  Tensor o_proj;                    // [hidden, heads * head_dim]
  Tensor q_norm;                    // [head_dim]
  Tensor k_norm;                    // [head_dim]
  Tensor post_attention_layernorm;  // [hidden]
  Tensor gate_proj;                 // [intermediate, hidden]
  Tensor up_proj;                   // [intermediate, hidden]
  Tensor down_proj;                 // [hidden, intermediate]
};

struct Qwen3VLTextWeights {
  Tensor embed_tokens;  // [vocab, hidden], host
  std::vector<DecoderLayerWeights> layers;
};

// Whether the first `selected_layers` layers read the tensor `name` (the embedding and those
// layers' tensors; not the later layers, the final norm, lm_head or the vision tower).
bool is_needed(std::string_view name, int64_t selected_layers);

// Validates every tensor the first `selected_layers` layers need (present, the config's shape, a
// float dtype) before placing any, so a wrong or incomplete checkpoint fails with one message
// naming the file and the tensor. bytes (optional): bytes placed on ctx (0 on the CPU: mapped).
Qwen3VLTextWeights load_weights(ops::Context& ctx, const Checkpoint& ckpt,
                                const Qwen3VLTextConfig& config, int64_t selected_layers, DType act,
                                int64_t* bytes = nullptr);

// Random weights made where they are used (full-width benchmarks without a checkpoint): norms
// near 1, projections N(0, 1/fan_in), the embedding N(0, 0.02) on the host; each value depends only
// on (seed, name, index), so the CPU and the GPU make the same weights.
Qwen3VLTextWeights random_weights(ops::Context& ctx, const Qwen3VLTextConfig& config,
                                  int64_t selected_layers, DType act, uint64_t seed,
                                  int64_t* bytes = nullptr);

}  // namespace avdit::models::text::qwen3vl
