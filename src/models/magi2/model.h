// Magi2Model: the MAGI-2 preview transformer forward, written once against the op set, for any
// context: the CPU (float32 oracle, or bf16 activations with the reference's rounding points) and
// the GPU (fp32 parity or bf16 production). Embedding + time overwrite, the layers (mHC around
// attention and the dense MLP or the multi-head MoE), final norms and linears, on a packed
// sequence. The residual stream lives in modality-sorted order (the reference's
// ModalityDispatcher), so that each modality-specific weight applies to one contiguous row range;
// the attention core runs in packed order. Named points (model.cpp) carry the fixture's names, in
// packed order; the sub-layer boundaries attn.{i}.in / core_in / core / out and mlp.{i}.in / out
// show the tensors as the forward holds them (no gather: the marks of a stage profiler).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "models/magi2/config.h"
#include "models/magi2/layers.h"
#include "models/magi2/token_layout.h"
#include "models/magi2/weights.h"
#include "ops/attention.h"
#include "ops/mhc.h"
#include "ops/context.h"
#include "ops/fp8_gemms.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::magi2 {

inline constexpr float kNormEps = 1e-6f;  // every RMSNorm of the reference

// One packed layout on the context (built once per layout; a sampler keeps it across steps).
struct Magi2Plan {
  TokenLayout layout;      // host: the modality-sorted order
  Tensor perm, inv;        // I32 [L]: permuted row -> packed token, packed token -> permuted row
  Tensor group;            // I32 [L]: the modality of each permuted row
  Tensor rope;             // F32 [L, 6B] = [sin | cos], packed order
  ops::Segments segments;  // the items (attention documents), packed order
  int64_t tokens() const { return layout.tokens(); }
};
inline RowOrder row_order(const Magi2Plan& p) { return {p.layout, p.perm, p.inv, p.group, p.rope}; }

class Magi2Model {
 public:
  // Weights from a checkpoint (config from its config.json unless given), on ctx for activations in
  // `act` (F32 or BF16). On the CPU the weights stay mapped.
  Magi2Model(ops::Context& ctx, const Checkpoint& ckpt, DType act = DType::F32,
             const LoadOptions& load = {});
  Magi2Model(ops::Context& ctx, const Checkpoint& ckpt, const Magi2Config& config, DType act,
             const LoadOptions& load = {});
  // Random weights made on ctx (full-width benchmarks without a checkpoint); of `load`,
  // nvfp4_experts (packed random experts), moe_combine, nvfp4_expert_inputs and router_bias_add.
  Magi2Model(ops::Context& ctx, const Magi2Config& config, DType act, uint64_t seed,
             const LoadOptions& load = {});

  const Magi2Config& config() const { return config_; }
  const Magi2Weights& weights() const { return w_; }
  ops::Context& ctx() const { return ctx_; }
  DType act() const { return act_; }
  int64_t weight_bytes() const { return weight_bytes_; }

  // modality [L] (0 video, 1 audio, 2 text, 3 time as text), coords [L, 9] (packed order, any
  // context), cu_seqlens: the items' boundaries.
  Magi2Plan plan(const std::vector<int32_t>& modality, const Tensor& coords,
                 std::vector<int64_t> cu_seqlens) const;

  // The time embedding of per-token diffusion times t [L] (any context) on ctx: F32 [L,
  // time_channel_dim], with the reference's frequency table or the given one (freqs [dim / 2]).
  Tensor time_embedding(const Tensor& per_token_t, const Tensor& freqs = {}) const;

  // One forward on ctx: x [L, >= max_in_channels] F32 packed rows (each modality's first C_m
  // columns), time [L, time_channel_dim] F32 (the time embedding, packed order; undefined when the
  // dim is 0)
  // -> model_output F32 [L, out_channels] in packed order (text rows 0). Enqueues only.
  Tensor forward(const Magi2Plan& plan, const Tensor& x, const Tensor& time) const;

  // The MoE MLP sub-layer of MoE layer `layer` on mlp_in [L, hidden] (activation dtype, permuted
  // rows)
  // -> [L, hidden]: what forward runs there (the benchmark times it through these calls).
  Tensor moe_mlp(int64_t layer, const Magi2Plan& plan, const Tensor& mlp_in) const;

 private:
  Tensor embed(const Magi2Plan& p, const Tensor& x, const Tensor& time) const;
  void layer(int64_t i, const Magi2Plan& p, Tensor& s) const;
  // branch: 0 attention, 1 MLP (the part of the timing points mhc.{i}.norm / mhc.{i}.coef).
  ops::MhcCoefficients branch_coefficients(int64_t i, int branch, const Magi2Plan& p,
                                           const Tensor& s, const MhcBranchWeights& b) const;
  Tensor attention(int64_t i, const Magi2Plan& p, const Tensor& attn_in) const;
  Tensor dense_mlp(int64_t i, const Magi2Plan& p, const Tensor& mlp_in) const;
  Tensor post_adapter(const Magi2Plan& p, const Tensor& s) const;
  // y [L, N] (activation dtype unless said) = the layer's per-modality linear: one GEMM per group
  // on that group's rows (weight rows stacked [video; audio; text]), or one for groups == 1.
  Tensor grouped_linear(const Magi2Plan& p, const Tensor& x, const Tensor& w, int64_t groups) const;
  const ops::Fp8Gemms* fp8() const { return fp8_ ? &*fp8_ : nullptr; }

  ops::Context& ctx_;
  Magi2Config config_;
  DType act_;
  Magi2Weights w_;
  Tensor time_freqs_;
  int64_t weight_bytes_ = 0;
  ops::CombineSum moe_combine_ = ops::CombineSum::ByOutput;  // LoadOptions::moe_combine
  bool nvfp4_expert_inputs_ = false;                          // LoadOptions::nvfp4_expert_inputs
  std::optional<ops::Fp8Gemms> fp8_;                          // LoadOptions::fp8_gemm
  bool fp8_attention_ = false;                                // LoadOptions::fp8_attention
};

}  // namespace avdit::models::magi2
