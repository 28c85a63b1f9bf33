// The Qwen3.5 text model's weights as the encoder uses them: the embedding and the decoder layers
// up to the consumed hidden state, by official name. The last layers, the final norm, lm_head and
// the vision tower are never read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/text/qwen35/config.h"

namespace avdit {
class Checkpoint;
}
namespace avdit::ops {
class Context;
}

namespace avdit::models::text::qwen35 {

struct LinearAttentionWeights {  // Gated DeltaNet (`linear_attn.*`)
  Tensor in_proj_qkv, in_proj_z, in_proj_b, in_proj_a;
  Tensor conv1d;  // [C, 1, K]
  Tensor dt_bias, A_log;
  Tensor norm;  // the gated output norm: plain weight, not 1 + w
  Tensor out_proj;
};

struct FullAttentionWeights {  // gated attention (`self_attn.*`)
  Tensor q_proj;               // [H * 2D, hidden]: per head the query, then the gate
  Tensor k_proj, v_proj, o_proj;
  Tensor q_norm, k_norm;  // F32 [1, D], zero-centred
};

struct LayerWeights {
  LayerType type = LayerType::LinearAttention;
  Tensor input_layernorm, post_attention_layernorm;  // zero-centred
  LinearAttentionWeights linear;
  FullAttentionWeights full;
  Tensor gate_proj, up_proj, down_proj;
};

struct Qwen35TextWeights {
  Tensor embed_tokens;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
};

// The tensor prefix of the text model in this checkpoint: "model.language_model." (the released
// composite layout) or "model." (a text-only one). BadInput when neither holds the embedding.
std::string text_prefix(const Checkpoint& ckpt);

// Layers [0, layers) with every shape checked against the config first, so a wrong or incomplete
// checkpoint fails naming the tensor before anything is read. Weights stay in the checkpoint's
// dtype (bf16 mapped from the file on the CPU, uploaded on a GPU context).
Qwen35TextWeights load_text_weights(ops::Context& ctx, const Checkpoint& ckpt,
                                    const Qwen35TextConfig& config, int64_t layers);

// Random BF16 weights of the same names and shapes (F32 A_log, as the released file), on ctx: for
// timings at full width without the checkpoint. Seeded per tensor name, so the same seed gives the
// same weights. `bytes`, when given, receives their size.
Qwen35TextWeights random_text_weights(ops::Context& ctx, const Qwen35TextConfig& config,
                                      int64_t layers, uint64_t seed, int64_t* bytes = nullptr);

}  // namespace avdit::models::text::qwen35
