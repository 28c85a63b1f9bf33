// Magi2Weights: every tensor of a MAGI-2 preview checkpoint, looked up by its official name, checked against
// magi2_tensor_specs and kept memory-mapped (large matrices stay in their stored dtype; ops convert on the fly).
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "models/magi2/config.h"
#include "quant/nvfp4.h"

namespace avdit::models::magi2 {

// One mHC branch (attention or MLP) of a layer. phi: [n*hidden, 2n + n*n], columns [pre | post | res].
struct MhcBranchWeights {
  float alpha_pre = 0, alpha_post = 0, alpha_res = 0;
  Tensor bias_pre, bias_post;  // [n] F32
  Tensor bias_res;             // [n, n] F32
  Tensor phi;                  // [n*hidden, 2n + n*n] F32
};

struct AttentionWeights {
  Tensor pre_norm;     // [G*hidden] F32, used as (1 + w)
  Tensor linear_qkv;   // [G*(Hq+2Hkv)*D, hidden]
  Tensor linear_g;     // [G*Hq, hidden]
  Tensor linear_proj;  // [G*hidden, Hq*D]
  Tensor q_norm;       // [G*D] F32
  Tensor k_norm;       // [G*D] F32
  Tensor sinks;        // [max(1, sink_token_num), Hq] F32
};

struct DenseMlpWeights {
  Tensor pre_norm;       // [G*hidden] F32
  Tensor up_gate_proj;   // [G*2I, hidden], rows interleaved gate/linear
  Tensor down_proj;      // [G*hidden, I]
};

// The routed experts of one head that this process holds: experts [expert_begin, expert_end).
// Either the stored matrices (W_gate / W_up / W_down) or, with NVFP4 experts, their packed form
// (*_nvfp4, quant/nvfp4.h layout: K-major values [e1 - e0, N, K/2], e4m3 block scales [.., N, K/16], one
// fp32 scale per expert; the matching W_* are then undefined, so the bf16 copies never take memory).
struct MoeHeadExperts {
  Tensor W_gate;  // [e1 - e0, D_moe, De]  ([in, out])
  Tensor W_up;    // [e1 - e0, D_moe, De]
  Tensor W_down;  // [e1 - e0, De, D_moe]
  std::optional<quant::Nvfp4Matrix> W_gate_nvfp4, W_up_nvfp4, W_down_nvfp4;  // shape() as the W_* they replace
  bool nvfp4() const { return W_gate_nvfp4.has_value(); }
};

struct MoeWeights {
  Tensor pre_norm;                // [3*hidden] F32
  Tensor split_linear;            // [W, hidden]
  Tensor merge_linear;            // [hidden, W]
  Tensor gate;                    // [H_moe*E, D_moe] F32 (router; always complete)
  Tensor expert_bias;             // [H_moe*E] F32 (expert_bias_ema when present, as the reference's loader)
  std::vector<MoeHeadExperts> heads;  // [H_moe]
  int64_t expert_begin = 0, expert_end = 0;
  Tensor shared_fc1, shared_fc2;  // [2*I_s, hidden], [hidden, I_s]
  Tensor ms_fc1, ms_fc2;          // [3*2*I_m, hidden], [3*hidden, I_m]
};

struct LayerWeights {
  int64_t groups = 1;  // 3 in mm_layers
  bool moe = false;
  MhcBranchWeights mhc_attn, mhc_mlp;
  Tensor mhc_norm;  // [G*n*hidden] F32, shared by both branches
  AttentionWeights attention;
  DenseMlpWeights dense;
  MoeWeights moe_mlp;
};

struct Magi2Weights {
  Magi2Config config;
  Tensor video_embedder_w, video_embedder_b;  // [n*hidden, C_v], [n*hidden]
  Tensor audio_embedder_w, audio_embedder_b;
  Tensor text_embedder_w, text_embedder_b;
  Tensor rope_bands;                          // [head_dim/8] F32
  Tensor final_norm_video, final_norm_audio;  // [n*hidden] F32
  Tensor final_linear_video, final_linear_audio;  // [C_v, n*hidden], [C_a, n*hidden]
  std::vector<LayerWeights> layers;
};

struct LoadOptions {
  // Routed experts [expert_begin, expert_end) of every head (expert parallelism); nullopt = all.
  std::optional<std::pair<int64_t, int64_t>> expert_range;
  // The reference's MAGI2_ROUTER_BIAS_SOURCE=main: keep expert_bias instead of expert_bias_ema.
  bool router_bias_from_main = false;
  // Pack the routed experts to NVFP4 at load time (the CLI's --nvfp4-experts): the same packed tensors
  // `avdit quantize --nvfp4 experts` writes, so both give bit-identical forwards. A checkpoint that is
  // already packed (tensors NAME.nvfp4_values, see quant/nvfp4_checkpoint.h) loads packed regardless.
  bool nvfp4_experts = false;
};

// Validates every tensor of magi2_tensor_specs(config) (BadInput naming tensor, file, expected and found shape).
Magi2Weights load_magi2_weights(const Checkpoint& ckpt, const Magi2Config& config, const LoadOptions& options = {});

}  // namespace avdit::models::magi2
