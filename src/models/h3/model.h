// H3Model: the MiniMax-H3 DiT forward, written once against the op set, for any context: the CPU
// (float32 oracle, or bf16 activations with the reference's rounding points) and the GPU (fp32
// parity or bf16 production). Token refiner, patch projections, time embedding and per-timestep
// adaLN tables, 3D-RoPE attention blocks, final layer and heads, on a packed sequence (packing.h).
// The block steps are the fused ops of ops/modulation.h. Named points (model.cpp) carry the
// fixture's names.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/h3/config.h"
#include "models/h3/packing.h"
#include "models/h3/weights.h"
#include "models/fp16_recipe.h"
#include "ops/attention.h"
#include "ops/context.h"
#include "ops/fp8_gemms.h"
#include "ops/modulation.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::h3 {

// One packed layout on the context (built once per layout; a sampler keeps it across steps).
struct H3Plan {
  PackedLayout layout;                    // the host layout it was built from
  Tensor text_pos, img_pos, audio_pos;    // I32
  Tensor update_mask, update_audio_mask;  // U8
  Tensor rope_cos, rope_sin;              // F32 [S, 3 L] (values rounded to the activation dtype)
  ops::Segments segments;                 // the attention documents
};

// The adaLN modulation of a set of timesteps (depends only on the timesteps, not on the tokens).
struct H3Tables {
  std::vector<float> timesteps;  // the distinct timesteps, ascending
  Tensor t_emb;                  // F32 [M, Dt] (undefined in the curve variant)
  Tensor adaln_input;            // F32 [M, Dt]
  Tensor storage;                // every table below in one allocation (one copy moves them all)
  std::vector<Tensor>
      block;     // per block [M, 18 H], activation dtype ([3M, 6H]: row m*3 + modality)
  Tensor final;  // [M, 2 H]: shift | scale
  // The same tables as views of another storage of this size (a graph's fixed copy).
  H3Tables over(const Tensor& other_storage) const;
};

struct H3Outputs {
  Tensor video;  // F32 [n_img, 96]: video head at img_pos rows, keyframe rows zeroed
  Tensor audio;  // F32 [2 T_a, 32]: audio head at audio_pos rows
};

// The adaLN table: the modulation depends only on the timestep, and a run visits a fixed set of
// timestep sets (one per step: the video's and the audio's timestep), so it is a table computed at
// load, and the adaLN projections (39% of the DiT's weights) are never placed on the device.
struct H3TableOptions {
  std::vector<std::vector<float>> sets;  // each step's sorted unique timesteps (PackedTimesteps)
  // The tables of `sets` made earlier (a cache on disk, same order): then the projections are not
  // even read. Empty: computed at load, one block's projection on the device at a time.
  std::vector<H3Tables> given;
};

// Tables of M = set.size() timesteps over a storage laid out as H3Model's (`blocks` blocks of
// [M, adaln_out_features], then [M, final_adaln_out_features]): a table read back from a cache.
H3Tables tables_over_storage(const H3Config& c, int64_t blocks, std::vector<float> set,
                             Tensor storage, Tensor adaln_input, Tensor t_emb);

class H3Model {
 public:
  // Weights from a checkpoint (config from its config.json unless given), on ctx in the activation
  // dtype `act` (F32, BF16, or F16: the fp16 recipe, fp16_recipe.h) with the reference's fp32
  // islands. On the CPU the weights stay mapped (F16: rounded to fp16 copies, the GPU's values).
  H3Model(ops::Context& ctx, const Checkpoint& ckpt, DType act = DType::F32);
  H3Model(ops::Context& ctx, const Checkpoint& ckpt, const H3Config& config,
          DType act = DType::F32);
  // Random weights made on ctx (benchmarks and memory runs at full width without a checkpoint).
  H3Model(ops::Context& ctx, const H3Config& config, DType act, uint64_t seed);
  // With the adaLN table of `table` (see H3TableOptions): tables() then answers those sets only.
  H3Model(ops::Context& ctx, const Checkpoint& ckpt, DType act, const H3TableOptions& table);
  // Random weights with the adaLN table: each projection is drawn on ctx (random_weight) when its
  // block's table is computed, then freed; the tables equal those of the random model above.
  H3Model(ops::Context& ctx, const H3Config& config, DType act, uint64_t seed,
          const H3TableOptions& table);

  const H3Config& config() const { return config_; }
  const H3Weights& weights() const { return w_; }
  ops::Context& ctx() const { return ctx_; }
  DType act() const { return act_; }
  // The fp16 recipe's fixes (F16 activations only; default: all of them).
  void set_fp16_fixes(const Fp16Fixes& f) { fixes_ = f; }
  const Fp16Fixes& fp16_fixes() const { return fixes_; }
  // FP8 (e4m3; ops/linear_fp8.h) for every block GEMM (qkv, out_proj, fc1, fc2 of the DiT and the
  // text refiner) with the given scaling, or none: issue 39's option. Weights are quantized on
  // first use.
  void set_fp8_gemm(std::optional<ops::Fp8Scaling> s) {
    fp8_.reset();
    if (s) fp8_.emplace(*s);
  }
  std::optional<ops::Fp8Scaling> fp8_gemm() const {
    return fp8_ ? std::optional{fp8_->scaling()} : std::nullopt;
  }
  // FP8 (ops/attention_fp8.h: the project's FP8 kernel on the GPU, its emulation on the CPU) for
  // every attention core of the DiT and the text refiner: issue 39's other option, off by default.
  void set_fp8_attention(bool on) { fp8_attention_ = on; }
  bool fp8_attention() const { return fp8_attention_; }
  int64_t weight_bytes() const { return weight_bytes_; }
  // The bytes the adaLN projections would take on ctx, when a table replaced them (else 0).
  int64_t adaln_bytes_avoided() const { return adaln_bytes_avoided_; }
  // The table's sets and tables (on ctx), in H3TableOptions::sets order; empty without a table.
  const std::vector<std::pair<std::vector<float>, H3Tables>>& table() const { return table_; }

  // text_embeds [L, text_dim] (or [1, L, text_dim]; any float dtype, any context) -> [L, H] in the
  // activation dtype on ctx: condition_proj, the refiner blocks (attention over the text rows, no
  // RoPE, no adaLN), token_refiner.final_norm. Depends only on the prompt: a sampler calls it once.
  Tensor refine_text(const Tensor& text_embeds) const;

  H3Plan plan(const PackedLayout& layout) const;
  // The modulation of one step's timesteps: from the adaLN table when the model has one (BadInput
  // for a set it lacks), else computed from the projections.
  H3Tables tables(const std::vector<float>& unique_timesteps) const;

  // One forward. On ctx: text_refined [L, H] (activation dtype), video_rows [n_img, 96] and
  // audio_rows [2 T_a, 32] F32, mod_rows (adaln_rows) and inverse (PackedTimesteps::inverse) I32
  // [S]. Outputs are data-ward velocities (x0 = x_t + sigma v). Enqueues only (no host
  // synchronisation).
  H3Outputs forward(const H3Plan& plan, const H3Tables& tables, const Tensor& mod_rows,
                    const Tensor& inverse, const Tensor& text_refined, const Tensor& video_rows,
                    const Tensor& audio_rows) const;

 private:
  ops::Context& ctx_;
  H3Config config_;
  DType act_;
  // The time embedding of `unique` into t (timesteps, t_emb, adaln_input); returns silu(t_emb) in
  // the activation dtype, the adaLN projections' input.
  Tensor time_input(const std::vector<float>& unique, H3Tables& t) const;
  // t's storage and block / final views for M timesteps.
  void allocate(H3Tables& t, int64_t M) const;
  // The table of `table` (H3TableOptions), each projection placed on ctx by `place` (by name)
  // one block at a time; weights other than the projections are loaded already.
  void build_table(const H3TableOptions& table,
                   const std::function<Tensor(const std::string&)>& place);
  // The residual stream's dtype (F32 under the fp16 recipe's residual fix, else the activations').
  DType residual_dtype() const;
  // The SwiGLU product's dtype (F32 under the fp16 recipe's gating fix, else the activations').
  DType gating_dtype() const;
  // A bias-free linear inside a block: the FP8 GEMM when set, the fp16 recipe's GEMM
  // (ops/linear_f16.h) with F16 activations, else ops::linear.
  Tensor block_linear(const Tensor& x, const Tensor& w, DType out) const;
  // The attention core of a block: ops::attention_fp8 when set, else ops::attention.
  Tensor attention_core(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                        const ops::Segments& seg) const;
  // The residual_norm_modulate arguments every call shares under these activations.
  ops::ResidualNormModulate rnm(ops::ResidualNormModulate a) const;

  H3Weights w_;
  int64_t weight_bytes_ = 0;
  int64_t adaln_bytes_avoided_ = 0;
  std::vector<std::pair<std::vector<float>, H3Tables>> table_;
  Fp16Fixes fixes_;
  std::optional<ops::Fp8Gemms> fp8_;
  bool fp8_attention_ = false;
};

}  // namespace avdit::models::h3
