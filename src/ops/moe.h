// The multi-head mixture of experts of the MAGI-2 preview as ops: the router, the routed experts
// (permutation by (head, expert), the expert MLPs, the combine) on weights the backend prepares
// once, and the layer's output (merge linear + shared expert + modality-specific experts). The CPU
// is the float32 oracle; the GPU runs a fused Hopper kernel in bf16
// (ops/cuda/sm90/moe_fused_experts.cu), CUTLASS grouped GEMMs where that kernel does not apply, and
// fp32 SIMT kernels for parity.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ops/dispatch.h"
#include "quant/nvfp4.h"

namespace avdit::ops {

// How routed_experts sums the K weighted expert rows of a (token, head): as the output dtype says
// (its contract below), or forced to a bf16 running sum or an fp32 sum rounded once - a kernel
// precision difference `generate --moe-combine` turns on purpose (the floor of `avdit score`).
enum class CombineSum : uint8_t { ByOutput, Bf16, F32 };

struct MoeConfig {
  int64_t heads = 0;       // H_moe (12 in the preview)
  int64_t experts = 0;     // E per head (256)
  int64_t top_k = 0;       // K (6)
  int64_t head_dim = 0;    // D_moe (256): head h reads columns [h D, (h + 1) D) of the split output
  bool softmax = false;    // score function: softmax over a head's experts; else sigmoid
  bool route_norm = true;  // L1-normalise the K unbiased scores (eps 1e-12) before route_scale
  float route_scale = 1.0f;
  CombineSum combine = CombineSum::ByOutput;
  // NVFP4 fake quantisation of both expert GEMM inputs (x, and the hidden activations before the
  // down projection), each with a dynamic per-tensor scale (quant/nvfp4_activations.h): what NVFP4
  // activations would cost (generate --nvfp4-expert-inputs). The CPU only for now.
  bool nvfp4_inputs = false;
};

// Routing of every (token, head): fp32 logits x_h . gate_h^T, scores, the top K of score + bias
// (ties: the lower expert index wins, a deterministic rule), weights from the unbiased scores.
struct Routing {
  Tensor indices;  // I32 [T, heads, K], by descending biased score
  Tensor weights;  // F32 [T, heads, K] (route_scale included)
  Tensor logits;   // F32 [T, heads, E] when asked for (a probe wants them), else undefined
  // F32 [T, heads] when asked for (router statistics), else undefined: the K-th minus the (K+1)-th
  // biased score (score + bias) of the (token, head), how close the choice came to flipping; +inf
  // when K = E.
  Tensor gap;
};

namespace cuda {
struct ExpertStore;  // the CUDA backend's form of the routed experts (ops/cuda/moe_experts.h)
}

// The routed experts of one MoE layer: experts [begin, end) of every head (expert parallelism holds
// a range). Filled by the loader as the checkpoint stores them - gate, up [n, D, De] and down [n,
// De, D]
// ([in, out], n = end - begin), one entry per head or one entry with every head's rows stacked; or
// their NVFP4 packing (quant/nvfp4.h) - and placed by prepare_experts: the CPU keeps them as they
// are (mapped; NVFP4 is dequantised one expert at a time), the GPU uploads or packs them (device).
struct ExpertWeights {
  int64_t inter = 0;           // De
  int64_t begin = 0, end = 0;  // experts of each head held here
  std::vector<Tensor> gate, up, down;
  std::vector<quant::Nvfp4Matrix> gate_q, up_q, down_q;
  std::shared_ptr<const cuda::ExpertStore> device;
  int64_t bytes = 0;  // bytes they take on the context (0 on the CPU: mapped)
  bool nvfp4() const { return !gate_q.empty(); }
};

// merge_linear [hidden, W] and shared_expert_fc2 [hidden, Is]: as stored on the CPU; side by side
// ([hidden, W + Is]) on the GPU, so that one GEMM over [routed output | shared h] sums both.
struct MoeOutputWeights {
  Tensor merge, shared_fc2;
  Tensor merge_shared;
  int64_t width = 0;  // W
  int64_t bytes = 0;
};

namespace cpu {
Routing route(const Tensor& x, const Tensor& gate, const Tensor& bias, const MoeConfig& cfg,
              bool keep_logits, bool keep_gap);
void routed_experts(const Tensor& x, const Routing& r, const ExpertWeights& w, const MoeConfig& cfg,
                    Tensor& out);
void moe_output(const Tensor& cat, const Tensor& specific, const MoeOutputWeights& w, Tensor& out,
                Tensor* merge_out, Tensor* shared_out);
}  // namespace cpu
namespace cuda {
Routing route(CudaContext& c, const Tensor& x, const Tensor& gate, const Tensor& bias,
              const MoeConfig& cfg, bool keep_logits, bool keep_gap);
ExpertWeights prepare_experts(CudaContext& c, ExpertWeights w, const MoeConfig& cfg, DType act);
void routed_experts(CudaContext& c, const Tensor& x, const Routing& r, const ExpertWeights& w,
                    const MoeConfig& cfg, Tensor& out);
MoeOutputWeights prepare_moe_output(CudaContext& c, const Tensor& merge, const Tensor& shared_fc2,
                                    DType act);
void moe_output(CudaContext& c, const Tensor& cat, const Tensor& specific,
                const MoeOutputWeights& w, Tensor& out, Tensor* merge_out, Tensor* shared_out);
}  // namespace cuda

// x [T, heads * head_dim] (F32 or BF16); gate F32 [heads * E, head_dim]; bias F32 [heads * E].
inline Routing route(Context& ctx, const Tensor& x, const Tensor& gate, const Tensor& bias,
                     const MoeConfig& cfg, bool keep_logits = false, bool keep_gap = false) {
  return AVDIT_OP(ctx, route, x, gate, bias, cfg, keep_logits, keep_gap);
}

// The experts as the context runs them (see ExpertWeights). act: the activation dtype of the calls
// that will follow (the GPU keeps bf16 experts for the tensor cores, F32 for the fp32 parity mode).
ExpertWeights prepare_experts(Context& ctx, ExpertWeights w, const MoeConfig& cfg, DType act);

// out[t, h D + d] for every token t and head h: sum over the K choices of weights[t, h, k] *
// expert_{h, indices[t, h, k]}(x[t, h-th D columns]), expert(v) = swiglu7(v . Wg, v . Wu) . Wd,
// over the experts held here (others contribute 0). out [T, >= heads * D]: its first heads * D
// columns are written (the layer puts the shared expert's h beside them). Precision follows out's
// dtype: F32: fp32 throughout; BF16: the reference Triton kernel's rounding - swiglu7 of the fp32
// gate/up accumulators rounded to bf16, the fp32 down accumulator times the weight rounded to bf16,
// summed per (token, head) in ascending expert order with the running sum rounded after each add
// (the GPU's atomic order is not reproducible; this fixed order is). Deterministic on both
// backends. cfg.combine other than ByOutput changes only the summation (the rows keep out's
// rounding): Bf16 rounds the running sum to bf16 after each add, F32 sums in fp32 and rounds once.
inline void routed_experts(Context& ctx, const Tensor& x, const Routing& r, const ExpertWeights& w,
                           const MoeConfig& cfg, Tensor& out) {
  AVDIT_OP(ctx, routed_experts, x, r, w, cfg, out);
}

MoeOutputWeights prepare_moe_output(Context& ctx, const Tensor& merge, const Tensor& shared_fc2,
                                    DType act);

// The MoE layer's output from cat = [routed experts' output (W columns) | shared expert's h (Is)]
// and the modality-specific experts' output `specific` [T, hidden]: with R rounding to out's dtype,
//   merge_out = R(cat[:, :W] . merge^T), shared_out = R(R(cat[:, W:] . shared_fc2^T) + specific),
//   out = R(merge_out + shared_out)
// (the reference's separate bf16 tensors). The GPU computes out in one GEMM with `specific` as its
// C operand (one rounding). merge_out / shared_out (optional, out's dtype) receive the parts.
inline void moe_output(Context& ctx, const Tensor& cat, const Tensor& specific,
                       const MoeOutputWeights& w, Tensor& out, Tensor* merge_out = nullptr,
                       Tensor* shared_out = nullptr) {
  AVDIT_OP(ctx, moe_output, cat, specific, w, out, merge_out, shared_out);
}

}  // namespace avdit::ops
