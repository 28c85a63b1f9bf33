// Magi2Weights: every tensor of a MAGI-2 preview checkpoint by its official name, checked against
// magi2_tensor_specs and placed on an execution context: on the CPU zero-copy views of the mapped
// files (ops widen them on the fly; small fp32 tensors converted only if stored otherwise); on the
// GPU uploaded in the activation dtype where the reference holds bf16 (qkv, g, proj, dense MLP,
// split / merge, shared and routed experts), the reference's fp32 islands (embedders, final
// linears, router, mHC phi, norms, biases, sinks) in F32. The routed experts and the MoE output
// linears are prepared by the backend (ops/moe.h: packed for the Hopper kernels, NVFP4 kept
// packed).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "models/magi2/config.h"
#include "ops/context.h"
#include "ops/linear_fp8.h"
#include "ops/mhc.h"
#include "ops/moe.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::magi2 {

// One mHC branch (attention or MLP) of a layer. phi: [n*hidden, 2n + n*n] F32, columns [pre | post
// | res].
struct MhcBranchWeights {
  Tensor phi;
  ops::MhcParams coef;  // alphas x 1/sqrt(n*hidden), biases
};

struct AttentionWeights {
  Tensor pre_norm;        // [G, hidden] F32, used as (1 + w)
  Tensor linear_qkv;      // [G*(Hq+2Hkv)*D, hidden]
  Tensor linear_g;        // [G*Hq, hidden]
  Tensor linear_proj;     // [G*hidden, Hq*D]
  Tensor q_norm, k_norm;  // [G, D] F32
  Tensor sinks;  // [Hq] F32: log-sum-exp over the sink tokens (one extra softmax logit per head)
};

struct DenseMlpWeights {
  Tensor pre_norm;      // [G, hidden] F32
  Tensor up_gate_proj;  // [G*2I, hidden], rows interleaved gate/linear
  Tensor down_proj;     // [G*hidden, I]
};

struct MoeWeights {
  Tensor pre_norm;      // [3, hidden] F32
  Tensor split_linear;  // [W, hidden]
  Tensor gate;          // [H_moe*E, D_moe] F32 (router; always complete)
  Tensor expert_bias;   // [H_moe*E] F32 (expert_bias_ema when present, as the reference's loader)
  ops::ExpertWeights experts;    // W_gate, W_up, W_down
  Tensor shared_fc1;             // [2*I_s, hidden], rows interleaved gate/linear
  Tensor ms_fc1, ms_fc2;         // [3*2*I_m, hidden], [3*hidden, I_m]
  ops::MoeOutputWeights output;  // merge_linear [hidden, W], shared_expert_fc2 [hidden, I_s]
};

struct LayerWeights {
  int64_t groups = 1;  // 3 in mm_layers
  bool moe = false;
  MhcBranchWeights mhc_attn, mhc_mlp;
  Tensor mhc_norm;  // [G, n*hidden] F32, shared by both branches
  AttentionWeights attention;
  DenseMlpWeights dense;
  MoeWeights moe_mlp;
};

struct Magi2Weights {
  Tensor embedder_w[3];  // video, audio, text: [n*hidden, C_m]
  Tensor embedder_b;     // [3, n*hidden] F32
  Tensor rope_bands;     // [head_dim/8] F32
  Tensor final_norm;     // [3, n*hidden] F32: video, audio, and a zero row for text (rows not used)
  Tensor final_linear[2];  // video [C_v, n*hidden], audio [C_a, n*hidden]
  std::vector<LayerWeights> layers;
};

struct LoadOptions {
  // Routed experts [expert_begin, expert_end) of every head (expert parallelism, CPU); nullopt =
  // all.
  std::optional<std::pair<int64_t, int64_t>> expert_range;
  // The reference's MAGI2_ROUTER_BIAS_SOURCE=main: keep expert_bias instead of expert_bias_ema.
  bool router_bias_from_main = false;
  // Pack the routed experts to NVFP4 at load time (the CLI's --nvfp4-experts): the same packed
  // tensors `avdit quantize --nvfp4 experts` writes, so both give bit-identical forwards. A
  // checkpoint that is already packed (tensors NAME.nvfp4_values, see quant/nvfp4_checkpoint.h)
  // loads packed regardless.
  bool nvfp4_experts = false;
  // The routed experts' combine summation (ops/moe.h CombineSum): a numerics knob, not a weight
  // option; it rides here because the model is built once per set of options (generate
  // --moe-combine, the floor of `avdit score`).
  ops::CombineSum moe_combine = ops::CombineSum::ByOutput;
  // NVFP4 fake quantisation of the expert GEMM inputs (ops::MoeConfig::nvfp4_inputs; generate
  // --nvfp4-expert-inputs): also a numerics knob.
  bool nvfp4_expert_inputs = false;
  // Added to the router bias of the MoE layers it names (block index -> F32 [H_moe * E]): an
  // expert mask (generate --expert-mask, analysis/routes/mask.h) moves masked experts far below
  // any score.
  std::map<int64_t, Tensor> router_bias_add;
  // Issue 39's FP8 options (numerics knobs as well; generate --fp8-gemm / --fp8-attention, bench
  // step --precision fp8 / --fp8-attention): the dense GEMMs of every layer (linear_qkv,
  // linear_proj, the dense MLPs, the MoE's split linear, shared and modality-specific experts)
  // through e4m3 with this scaling; every attention core through ops::attention_fp8 with the
  // sinks.
  std::optional<ops::Fp8Scaling> fp8_gemm;
  bool fp8_attention = false;
};

// The MoE config of the ops (router and experts) from the model config.
ops::MoeConfig moe_config(const Magi2Config& config);

// Validates every tensor of magi2_tensor_specs(config) as it is read (BadInput naming tensor, file,
// expected and found shape) and places it on ctx (see above) for activations in `act` (F32 or
// BF16). bytes (optional) receives the bytes the weights take on ctx (0 on the CPU: mapped).
Magi2Weights load_weights(ops::Context& ctx, const Checkpoint& ckpt, const Magi2Config& config,
                          DType act, const LoadOptions& options = {}, int64_t* bytes = nullptr);

// Random weights made on ctx (full-width benchmarks without a checkpoint): matrices N(0, gain /
// sqrt(fan_in)) as init_checkpoint's rule (init_linear_gain), drawn on the context; every small
// tensor (norms, mHC, sinks, biases, bands) exactly init_checkpoint's values (init_tensor). With
// options.nvfp4_experts the routed experts are made packed (quant/nvfp4_random.h: uniform e2m1
// codes of the same standard deviation) one layer at a time on the host, never in bf16.
Magi2Weights random_weights(ops::Context& ctx, const Magi2Config& config, DType act, uint64_t seed,
                            int64_t* bytes = nullptr, const LoadOptions& options = {});

// sinks [S, Hq] (any float dtype) -> one F32 logit per head, log(sum_s exp(sinks[s, h])): a single
// sink adding the same softmax-denominator term as the S sink tokens.
Tensor combined_sinks(const Tensor& sinks);

}  // namespace avdit::models::magi2
