// The MAGI-2 preview weights on the device, uploaded once from the (memory-mapped) host Magi2Weights.
// Precision per tensor follows the reference: in the bf16 mode the GEMM weights the reference holds in bf16
// (qkv, g, proj, dense MLP, split/merge, shared experts, routed experts) are bf16, while the embedders, final
// linears, router gate, mHC phi and every norm weight / bias / sink stay fp32; in the fp32 parity mode every
// weight is fp32 (bf16 values widen exactly). Norm weights keep their per-modality rows as [G, width].
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/models/magi2/kernels.h"
#include "models/magi2/weights.h"

namespace avdit::cuda::magi2 {

struct DeviceMhcBranch {
  MhcScalars scalars;            // alphas times 1/sqrt(n*hidden), as the CPU computes them
  Tensor bias_pre, bias_post;    // [n] F32
  Tensor bias_res;               // [n*n] F32
  Tensor phi;                    // [n*hidden, 2n + n*n] F32
  int64_t bytes = 0;
};

struct DeviceLayer {
  int64_t groups = 1;
  bool moe = false;
  DeviceMhcBranch mhc_attn, mhc_mlp;
  Tensor mhc_norm;       // [G, n*hidden] F32
  // Attention.
  Tensor attn_pre_norm;  // [G, hidden] F32
  Tensor linear_qkv;     // [G*(Hq+2Hkv)*D, hidden]
  Tensor linear_g;       // [G*Hq, hidden]
  Tensor linear_proj;    // [G*hidden, Hq*D]
  Tensor q_norm, k_norm; // [G, D] F32
  Tensor sinks;          // [Hq] F32: log-sum-exp over the sink tokens (one extra logit per head)
  // Dense MLP.
  Tensor mlp_pre_norm;   // [G, hidden] F32 (MoE: [3, hidden])
  Tensor up_gate_proj;   // [G*2I, hidden]
  Tensor down_proj;      // [G*hidden, I]
  // MoE.
  Tensor split_linear;                // [W, hidden]
  Tensor router_gate, expert_bias;    // [H*E, D_moe], [H*E] F32
  moe::ExpertWeights experts;         // [H*E, D_moe, De] x2, [H*E, De, D_moe]; undefined when packed
  // NVFP4 experts (quant/nvfp4.h layout, all heads stacked: values U8 [H*E, N, K/2], block scales
  // F8_E4M3 [H*E, N, K/16], global scales F32 [H*E]) resident at 4.5 bits per weight; each MoE call
  // dequantises them into the model's bf16 scratch (K-major) in front of the expert GEMMs.
  struct PackedExperts {
    Tensor values, block_scales, global_scales;
  };
  std::optional<PackedExperts> packed_gate, packed_up, packed_down;
  Tensor shared_fc1;                  // [2*I_s, hidden]
  // merge_linear [hidden, W] and shared_fc2 [hidden, I_s] side by side, [hidden, W + I_s]: one GEMM over
  // [routed experts' output | shared expert's h] computes and sums both (model.cpp). No extra memory: the
  // separate uploads are released.
  Tensor merge_shared;
  Tensor ms_fc1, ms_fc2;              // [3*2*I_m, hidden], [3*hidden, I_m]
};

struct DeviceWeights {
  models::magi2::Magi2Config config;
  DType gemm_dtype = DType::F32;  // the dtype of the bf16-in-reference GEMM weights (and of the activations)
  Tensor embedder_w[3];           // video, audio, text: [n*hidden, C_m] F32
  Tensor embedder_b;              // [3, n*hidden] F32
  Tensor rope_bands;              // [head_dim/8] F32
  Tensor final_norm;              // [3, n*hidden] F32: video, audio, and a zero row for text (unused rows)
  Tensor final_linear[2];         // video [C_v, n*hidden], audio [C_a, n*hidden] F32
  std::vector<DeviceLayer> layers;
  int64_t bytes = 0;              // device bytes of all of the above
};

// One mHC branch's tensors on the device (synchronous); width = n*hidden gives the logit scale.
DeviceMhcBranch upload_mhc_branch(Device& dev, const models::magi2::MhcBranchWeights& w, int64_t width);

// Uploads every tensor (synchronous; once per model). bf16 = the production mode's weight dtypes (above).
// The routed experts must be complete (no expert range): BadInput otherwise. NVFP4 experts
// (Magi2Weights loaded packed) stay packed on the device.
DeviceWeights upload_weights(Device& dev, const models::magi2::Magi2Weights& w, bool bf16);

}  // namespace avdit::cuda::magi2
