// The H3 forward, step by step as the golden README (and the reference's MiniMaxH3DiTModel) defines
// it; each numbered comment matches a step of the README's "Forward pass". Named points carry the
// fixture's intermediate names ("block{}_*" for every block, the fixture keeps block 0's).
#include "models/h3/model.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/h3/rope.h"
#include "models/h3/time_embedding.h"
#include "models/stack_points.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/attention_fp8.h"
#include "ops/linear.h"
#include "ops/linear_f16.h"
#include "ops/modulation.h"
#include "ops/rows.h"

namespace avdit::models::h3 {
namespace {

H3Config config_of(const Checkpoint& ckpt) {
  const nlohmann::json* j = ckpt.config();
  AVDIT_REQUIRE(j != nullptr,
                "H3 checkpoint {}: no config.json next to the weights (the official "
                "transformer/config.json is "
                "needed)",
                ckpt.dir().string());
  return resolve_variant(H3Config::from_json(*j), ckpt);
}

DType checked_act(DType act) {
  AVDIT_REQUIRE(act == DType::F32 || act == DType::BF16 || act == DType::F16,
                "H3: activations in {} are not supported (F32, BF16 or F16)", dtype_name(act));
  return act;
}

// Columns of one adaLN slice of a block table viewed as [3M, 6H] (row m * 3 + modality).
ops::TableColumns slice(const Tensor& table, int64_t s, int64_t H) {
  return {table.reshape({-1, kAdalnSlices * H}), s * H};
}

}  // namespace

H3Model::H3Model(ops::Context& ctx, const Checkpoint& ckpt, DType act)
    : H3Model(ctx, ckpt, config_of(ckpt), act) {}

H3Model::H3Model(ops::Context& ctx, const Checkpoint& ckpt, const H3Config& config, DType act)
    : ctx_(ctx), config_(resolve_variant(config, ckpt)), act_(checked_act(act)) {
  w_ = load_weights(ctx, ckpt, config_, act_, &weight_bytes_);
}

H3Model::H3Model(ops::Context& ctx, const H3Config& config, DType act, uint64_t seed)
    : ctx_(ctx), config_(config), act_(checked_act(act)) {
  w_ = random_weights(ctx, config_, act_, seed, &weight_bytes_);
}

DType H3Model::residual_dtype() const {
  return act_ == DType::F16 && fixes_.residual ? DType::F32 : act_;
}

DType H3Model::gating_dtype() const {
  return act_ == DType::F16 && fixes_.gating ? DType::F32 : act_;
}

Tensor H3Model::block_linear(const Tensor& x, const Tensor& w, DType out) const {
  if (fp8_) return fp8_->linear(ctx_, x, w, out);
  if (act_ != DType::F16) return ops::linear(ctx_, x, w, nullptr, out);
  return ops::linear_f16(ctx_, x, w, out, {fixes_.rowscale, fixes_.reduction});
}

Tensor H3Model::attention_core(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                               const ops::Segments& seg) const {
  if (fp8_attention_) return ops::attention_fp8(ctx_, q, k, v, scale, seg);
  return ops::attention(ctx_, q, k, v, scale, seg);
}

ops::ResidualNormModulate H3Model::rnm(ops::ResidualNormModulate a) const {
  a.act = act_;
  a.zero_gate_guard = act_ == DType::F16 && fixes_.gate;
  return a;
}

Tensor H3Model::refine_text(const Tensor& text_embeds_any) const {
  const H3Config& c = config_;
  Tensor te = text_embeds_any;
  if (te.ndim() == 3 && te.size(0) == 1) te = te.reshape({te.size(1), te.size(2)});
  AVDIT_REQUIRE(
      te.ndim() == 2 && te.size(1) == c.text_dim && te.size(0) > 0 && dtype_is_float(te.dtype()),
      "H3: text_embeds must be a float [text_len, {}] (text_dim), found {} {}", c.text_dim,
      dtype_name(te.dtype()), te.shape_str());
  ops::Context& ctx = ctx_;
  const int64_t L = te.size(0), H = c.hidden_size, heads = c.num_attention_heads,
                dh = c.attention_head_dim;
  const Tensor text = ops::cast(ctx, ctx.upload(te), act_);
  // 1. condition_proj, then refiner blocks: no RoPE, no adaLN, no gates, one text document.
  const DType xdt = residual_dtype();
  // Under the fp16 recipe the first product is widened too (it starts the residual).
  Tensor x = ops::linear(ctx, text, w_.condition_proj_weight, &w_.condition_proj_bias, xdt);
  ops::observe(ctx, {"text_projected"}, x);
  const DType gdt = gating_dtype();
  const ops::Segments doc = ops::plan_segments(ctx, {0, L}, heads, dh, act_);
  const float eps = static_cast<float>(c.norm_eps), qk_eps = static_cast<float>(c.qk_norm_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  const size_t nr = w_.refiner_blocks.size();
  Tensor h = ctx.empty({L, H}, act_);
  Tensor refined = ctx.empty({L, H}, act_);
  if (nr > 0)
    ops::residual_norm_modulate(ctx, x, rnm({nullptr, {}, nullptr, w_.refiner_blocks[0].norm1, eps}),
                                &h);
  for (size_t r = 0; r < nr; ++r) {
    const BlockWeights& b = w_.refiner_blocks[r];
    const Tensor qkv = block_linear(h, b.qkv_proj, act_).reshape({L, heads, 3, dh});
    Tensor q = ctx.empty({L, heads, dh}, act_), k = ctx.empty({L, heads, dh}, act_),
           v = ctx.empty({L, heads, dh}, act_);
    ops::qk_norm_rope_per_head(ctx, qkv, b.q_norm, b.k_norm, qk_eps, nullptr, nullptr, q, k, v);
    const Tensor core = attention_core(q, k, v, scale, doc).reshape({L, heads * dh});
    const Tensor attn = block_linear(core, b.out_proj, xdt);
    // x += attn; h = norm2(x)
    ops::residual_norm_modulate(ctx, x, rnm({&attn, {}, nullptr, b.norm2, eps}), &h);
    const Tensor u = block_linear(h, b.fc1, act_);
    const Tensor mlp = block_linear(ops::gated(ctx, ops::Gated::Swiglu, u, nullptr, gdt), b.fc2, xdt);
    // x += mlp; then the next block's norm1, or token_refiner.final_norm.
    const bool last = r + 1 == nr;
    ops::residual_norm_modulate(
        ctx, x,
        rnm({&mlp, {}, nullptr, last ? w_.refiner_final_norm : w_.refiner_blocks[r + 1].norm1, eps}),
        last ? &refined : &h);
    ops::observe(ctx, {"refiner_block{}", static_cast<int64_t>(r)}, x);
  }
  if (nr == 0)
    ops::residual_norm_modulate(ctx, x, rnm({nullptr, {}, nullptr, w_.refiner_final_norm, eps}),
                                &refined);
  ops::observe(ctx, {"text_refined"}, refined);
  return refined;
}

H3Plan H3Model::plan(const PackedLayout& l) const {
  ops::Context& ctx = ctx_;
  const int64_t S = l.seq_len;
  AVDIT_REQUIRE(static_cast<int64_t>(l.positions.size()) == 3 * S && S < (int64_t{1} << 31),
                "H3: layout of {} rows with {} positions", S, l.positions.size() / 3);
  H3Plan p;
  p.layout = l;
  p.text_pos = ops::index_tensor(ctx, l.text_pos);
  p.img_pos = ops::index_tensor(ctx, l.img_pos);
  p.audio_pos = ops::index_tensor(ctx, l.audio_pos);
  p.update_mask = ctx.upload(Tensor::from_data({static_cast<int64_t>(l.update_mask.size())},
                                               DType::U8, l.update_mask.data()));
  p.update_audio_mask = ctx.upload(Tensor::from_data(
      {static_cast<int64_t>(l.update_audio_mask.size())}, DType::U8, l.update_audio_mask.data()));
  // 4. RoPE tables from the float32-cast positions and the stored inv_freq (an fp32 island); the
  // bf16 reference casts its cos / sin cache to bf16.
  const RopeTables rope = rope_tables(l.positions, w_.rope_inv_freq);
  p.rope_cos = ctx.upload(act_ == DType::F32 ? rope.cos : rope.cos.to(act_).to_f32());
  p.rope_sin = ctx.upload(act_ == DType::F32 ? rope.sin : rope.sin.to(act_).to_f32());
  p.segments = ops::plan_segments(ctx, l.cu_seqlens, config_.num_attention_heads,
                                  config_.attention_head_dim, act_);
  return p;
}

Tensor H3Model::time_input(const std::vector<float>& unique, H3Tables& t) const {
  AVDIT_REQUIRE(!unique.empty(), "H3: no timesteps");
  ops::Context& ctx = ctx_;
  const H3Config& c = config_;
  t.timesteps = unique;
  // 3. Time embedding in fp32 (the reference's island), then silu -> adaLN input.
  if (c.curve_variant()) {
    t.adaln_input = ctx.upload(interpolate_adaln_curve(w_.adaln_t_table, unique));
  } else {
    const Tensor e = ctx.upload(timestep_sinusoid(unique, c.timestep_input_dim));
    const Tensor hidden = ops::silu(
        ctx, ops::linear(ctx, e, w_.time_proj_in_weight, &w_.time_proj_in_bias, DType::F32));
    t.t_emb = ops::linear(ctx, hidden, w_.time_proj_out_weight, &w_.time_proj_out_bias, DType::F32);
    t.adaln_input = ops::silu(ctx, t.t_emb);
  }
  // silu(t_emb) is cast to the activation dtype before the adaLN linears.
  return ops::cast(ctx, t.adaln_input, act_);
}

void H3Model::allocate(H3Tables& t, int64_t M) const {
  const H3Config& c = config_;
  const int64_t A = c.adaln_out_features, Af = c.final_adaln_out_features;
  const auto n = static_cast<int64_t>(w_.blocks.size());
  t.storage = ctx_.empty({n * M * A + M * Af}, act_);
  for (int64_t i = 0; i < n; ++i)
    t.block.push_back(t.storage.slice_rows(i * M * A, (i + 1) * M * A).reshape({M, A}));
  t.final = t.storage.slice_rows(n * M * A, n * M * A + M * Af).reshape({M, Af});
}

H3Tables H3Model::tables(const std::vector<float>& unique) const {
  for (const auto& [key, t] : table_)
    if (key == unique) return t;
  AVDIT_REQUIRE(table_.empty(),
                "H3: the adaLN table has no entry for timesteps [{}] (it was made for another "
                "schedule; run without the table or rebuild it for this one)",
                fmt::join(unique, ", "));
  ops::Context& ctx = ctx_;
  H3Tables t;
  const Tensor in = time_input(unique, t);
  allocate(t, static_cast<int64_t>(unique.size()));
  for (size_t i = 0; i < w_.blocks.size(); ++i) {
    const BlockWeights& b = w_.blocks[i];
    ops::linear_into(ctx, in, b.adaln_weight, &b.adaln_bias, t.block[i]);
  }
  ops::linear_into(ctx, in, w_.final_adaln_weight, &w_.final_adaln_bias, t.final);
  return t;
}

H3Model::H3Model(ops::Context& ctx, const Checkpoint& ckpt, DType act, const H3TableOptions& table)
    : ctx_(ctx), config_(resolve_variant(config_of(ckpt), ckpt)), act_(checked_act(act)) {
  w_ = load_weights(ctx, ckpt, config_, act_, &weight_bytes_, /*adaln=*/false);
  build_table(table, [&](const std::string& name) {
    const Tensor h = ckpt.get(name);
    return ctx.is_cuda() ? ctx.upload(h.to(act_)) : act_ == DType::F16 ? h.to(act_) : h;
  });
}

H3Model::H3Model(ops::Context& ctx, const H3Config& config, DType act, uint64_t seed,
                 const H3TableOptions& table)
    : ctx_(ctx), config_(config), act_(checked_act(act)) {
  w_ = random_weights(ctx, config_, act_, seed, &weight_bytes_, /*adaln=*/false);
  build_table(table, [&](const std::string& name) {
    return random_weight(ctx, config_, act_, seed, name);
  });
}

void H3Model::build_table(const H3TableOptions& table,
                          const std::function<Tensor(const std::string&)>& place) {
  ops::Context& ctx = ctx_;
  AVDIT_REQUIRE(!table.sets.empty(), "H3: an adaLN table needs the run's timestep sets");
  AVDIT_REQUIRE(table.given.empty() || table.given.size() == table.sets.size(),
                "H3: {} cached tables for {} timestep sets", table.given.size(), table.sets.size());
  const auto n = static_cast<int64_t>(w_.blocks.size());
  const int64_t bytes = ctx.is_cuda() ? dtype_nbytes(act_, 1) : 0;
  adaln_bytes_avoided_ = bytes * (config_.time_embed_dim + 1) *
                         (n * config_.adaln_out_features + config_.final_adaln_out_features);
  if (!table.given.empty()) {
    for (size_t s = 0; s < table.sets.size(); ++s) table_.emplace_back(table.sets[s], table.given[s]);
    return;
  }
  // Each set's time embedding, then block by block: the block's projection placed on ctx once,
  // applied to every set with the very linear tables() runs (so the values are tables()'s), freed.
  std::vector<Tensor> inputs;
  for (const auto& set : table.sets) {
    H3Tables t;
    inputs.push_back(time_input(set, t));
    allocate(t, static_cast<int64_t>(set.size()));
    table_.emplace_back(set, std::move(t));
  }
  for (int64_t i = 0; i <= n; ++i) {
    const std::string p = i < n ? fmt::format("blocks.{}.adaln_proj.linear.", i)
                                : std::string("final_layer.adaln_proj.linear.");
    const Tensor w = place(p + "weight"), b = place(p + "bias");
    for (size_t s = 0; s < table_.size(); ++s)
      ops::linear_into(ctx, inputs[s], w, &b, i < n ? table_[s].second.block[i] : table_[s].second.final);
  }
}

H3Tables tables_over_storage(const H3Config& c, int64_t blocks, std::vector<float> set,
                             Tensor storage, Tensor adaln_input, Tensor t_emb) {
  const auto M = static_cast<int64_t>(set.size());
  const int64_t A = c.adaln_out_features, Af = c.final_adaln_out_features;
  AVDIT_REQUIRE(storage.numel() == blocks * M * A + M * Af,
                "H3 adaLN table: {} values for {} timesteps, expected {}", storage.numel(), M,
                blocks * M * A + M * Af);
  H3Tables t;
  t.timesteps = std::move(set);
  t.storage = storage;
  for (int64_t i = 0; i < blocks; ++i)
    t.block.push_back(storage.slice_rows(i * M * A, (i + 1) * M * A).reshape({M, A}));
  t.final = storage.slice_rows(blocks * M * A, blocks * M * A + M * Af).reshape({M, Af});
  t.adaln_input = std::move(adaln_input);
  t.t_emb = std::move(t_emb);
  return t;
}

H3Tables H3Tables::over(const Tensor& other) const {
  AVDIT_CHECK(other.numel() == storage.numel() && other.dtype() == storage.dtype(),
              "H3 tables: a storage of {} elements for tables of {}", other.numel(),
              storage.numel());
  const auto M = static_cast<int64_t>(timesteps.size());
  const int64_t Af = (storage.numel() -
                      (block.empty() ? 0 : static_cast<int64_t>(block.size()) * block[0].numel())) /
                     M;
  H3Tables t = *this;
  t.storage = other;
  int64_t off = 0;
  for (Tensor& b : t.block) {
    const Shape shape = b.shape();
    b = other.slice_rows(off, off + b.numel()).reshape(shape);
    off += b.numel();
  }
  t.final = other.slice_rows(off, other.numel()).reshape({M, Af});
  return t;
}

H3Outputs H3Model::forward(const H3Plan& p, const H3Tables& tab, const Tensor& mod_rows,
                           const Tensor& inverse, const Tensor& text_refined,
                           const Tensor& video_rows, const Tensor& audio_rows) const {
  ops::Context& ctx = ctx_;
  const H3Config& c = config_;
  const PackedLayout& l = p.layout;
  const int64_t S = l.seq_len, H = c.hidden_size, I = c.inner_dim(), heads = c.num_attention_heads,
                dh = c.attention_head_dim;
  const auto n_img = static_cast<int64_t>(l.img_pos.size()),
             n_audio = static_cast<int64_t>(l.audio_pos.size());
  AVDIT_REQUIRE(
      text_refined.ndim() == 2 && text_refined.size(0) == l.text_len && text_refined.size(1) == H,
      "H3 forward: text_refined must be [{}, {}], found {}", l.text_len, H,
      text_refined.shape_str());
  AVDIT_REQUIRE(video_rows.ndim() == 2 && video_rows.size(0) == n_img &&
                    video_rows.size(1) == c.video_patch_dim(),
                "H3 forward: video rows must be [{}, {}], found {}", n_img, c.video_patch_dim(),
                video_rows.shape_str());
  AVDIT_REQUIRE(audio_rows.ndim() == 2 && audio_rows.size(0) == n_audio &&
                    audio_rows.size(1) == c.audio_latents_dim,
                "H3 forward: audio rows must be [{}, {}], found {}", n_audio, c.audio_latents_dim,
                audio_rows.shape_str());
  AVDIT_CHECK(mod_rows.numel() == S && inverse.numel() == S,
              "H3 forward: {} / {} row indices for {} rows", mod_rows.numel(), inverse.numel(), S);

  // 2. Packed input: text, fp32 patch projections of video and audio rows (rounded to the
  // activation dtype when written into the sequence); pad rows stay zero.
  const DType xdt = residual_dtype();
  const DType gdt = gating_dtype();
  Tensor x = ctx.zeros({S, H}, xdt);
  ops::scatter_rows(ctx, text_refined, p.text_pos, x);
  ops::scatter_rows(ctx,
                    ops::linear(ctx, ops::cast(ctx, video_rows, DType::F32),
                                w_.video_patch_proj_weight, &w_.video_patch_proj_bias, DType::F32),
                    p.img_pos, x);
  ops::scatter_rows(ctx,
                    ops::linear(ctx, ops::cast(ctx, audio_rows, DType::F32),
                                w_.audio_patch_proj_weight, &w_.audio_patch_proj_bias, DType::F32),
                    p.audio_pos, x);
  ops::observe(ctx, {"hidden_embed"}, x);
  if (tab.t_emb.defined()) ops::observe(ctx, {"t_emb"}, tab.t_emb);
  ops::observe(ctx, {"adaln_input"}, tab.adaln_input);
  ops::observe_lazy(ctx, {"rope_cos_sin_cache"}, [&] {
    return ctx.upload(rope_cos_sin_cache({ctx.download(p.rope_cos), ctx.download(p.rope_sin)}));
  });

  // 5. Blocks. Each block's first step (norm1 + modulation) is fused into the previous block's
  // last.
  const float eps = static_cast<float>(c.norm_eps), qk_eps = static_cast<float>(c.qk_norm_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  const auto n_blocks = static_cast<int64_t>(w_.blocks.size());
  Tensor h = ctx.empty({S, H}, act_);
  // The final layer's input: rounded to the activation dtype, stored F32 for the fp32 heads
  // (allocated where the last block ends: it need not live beside the blocks' temporaries).
  Tensor hf;
  const ops::ResidualNormModulate final_norm = rnm({nullptr,
                                                   {},
                                                   nullptr,
                                                   w_.final_norm,
                                                   static_cast<float>(c.final_norm_eps),
                                                   {tab.final, 0},
                                                   {tab.final, H},
                                                   &inverse});
  // The stack points (models/stack_points.h): a step cache may answer the blocks from block 0 or
  // 1; after a skip the final layer's norm runs on the stream it put at stack.output.
  ops::observe(ctx, {models::kStackInput}, x);
  bool skipped = false;
  if (n_blocks > 0) {
    const Tensor& t0 = tab.block[0];
    ops::residual_norm_modulate(ctx, x,
                                rnm({nullptr,
                                     {},
                                     nullptr,
                                     w_.blocks[0].norm1,
                                     eps,
                                     slice(t0, 0, H),
                                     slice(t0, 1, H),
                                     &mod_rows}),
                                &h);
    ops::observe(ctx, {models::kStackModulated}, h);
  } else {
    hf = ctx.empty({S, H}, DType::F32);
    ops::residual_norm_modulate(ctx, x, final_norm, &hf);
  }
  for (int64_t i = 0; i < n_blocks; ++i) {
    if ((skipped = models::skip_rest_of_stack(ctx, i))) break;
    const BlockWeights& b = w_.blocks[i];
    const Tensor& t = tab.block[i];
    ops::observe(ctx, {"block{}_adaln_linear_out", i}, t);
    ops::observe_lazy(ctx, {"block{}_norm1", i}, [&] {
      Tensor xc = x, n1 = ctx.empty({S, H}, act_);
      ops::residual_norm_modulate(ctx, xc, rnm({nullptr, {}, nullptr, b.norm1, eps}), &n1);
      return n1;
    });
    ops::observe(ctx, {"block{}_attn_in", i}, h);
    // Each stage's temporaries die inside its scope, so the peak is the larger stage, not their
    // sum (qkv and q/k/v at the core; fc1's output and the gated half at fc2).
    {
      // Attention: the qkv GEMM (rows grouped per head, as stored), QK-norm + RoPE + split, the
      // core, out_proj.
      Tensor q = ctx.empty({S, heads, dh}, act_), k = ctx.empty({S, heads, dh}, act_),
             v = ctx.empty({S, heads, dh}, act_);
      {
        const Tensor qkv =
            block_linear(h, b.qkv_proj, act_).reshape({S, heads, 3, dh});
        ops::observe(ctx, {"block{}_qkv", i}, qkv);
        if (ops::observed(ctx, {"block{}_q_normed", i})) {
          ops::qk_norm_rope_per_head(ctx, qkv, b.q_norm, b.k_norm, qk_eps, nullptr, nullptr, q, k,
                                     v);
          ops::observe(ctx, {"block{}_q_normed", i}, ops::clone(ctx, q));
          ops::observe(ctx, {"block{}_k_normed", i}, ops::clone(ctx, k));
        }
        ops::qk_norm_rope_per_head(ctx, qkv, b.q_norm, b.k_norm, qk_eps, &p.rope_cos, &p.rope_sin,
                                   q, k, v);
      }
      ops::observe(ctx, {"block{}_q_rope", i}, q);
      ops::observe(ctx, {"block{}_k_rope", i}, k);
      Tensor core = attention_core(q, k, v, scale, p.segments).reshape({S, I});
      q = k = v = Tensor();
      ops::observe(ctx, {"block{}_attn_core", i}, core);
      const Tensor attn = block_linear(core, b.out_proj, xdt);
      core = Tensor();
      ops::observe(ctx, {"block{}_attn_out", i}, attn);
      // x += gate_msa * attn; h = norm2(x) * (1 + scale_mlp) + shift_mlp
      ops::residual_norm_modulate(ctx, x,
                                  rnm({&attn, slice(t, 2, H), &mod_rows, b.norm2, eps,
                                       slice(t, 3, H), slice(t, 4, H), &mod_rows}),
                                  &h);
    }
    ops::observe(ctx, {"block{}_mlp_in", i}, h);
    // MLP: fc1 -> SwiGLU -> fc2.
    Tensor mlp;
    {
      Tensor g;
      {
        const Tensor u = block_linear(h, b.fc1, act_);
        ops::observe(ctx, {"block{}_mlp_up", i}, u);
        g = ops::gated(ctx, ops::Gated::Swiglu, u, nullptr, gdt);
      }
      ops::observe(ctx, {"block{}_mlp_act", i}, g);
      mlp = block_linear(g, b.fc2, xdt);
    }
    ops::observe(ctx, {"block{}_mlp_out", i}, mlp);
    // x += gate_mlp * mlp; then the next block's norm1 + modulation, or (6.) the final layer's:
    // no modality split (rows by timestep), final_norm_eps, fp32 out.
    if (i + 1 < n_blocks) {
      const Tensor& tn = tab.block[i + 1];
      ops::residual_norm_modulate(ctx, x,
                                  rnm({&mlp, slice(t, 5, H), &mod_rows, w_.blocks[i + 1].norm1, eps,
                                       slice(tn, 0, H), slice(tn, 1, H), &mod_rows}),
                                  &h);
    } else {
      ops::ResidualNormModulate a = final_norm;
      a.f = &mlp;
      a.gate = slice(t, 5, H);
      a.row = &mod_rows;
      h = Tensor();  // the last block's norm output is not needed beside hf
      hf = ctx.empty({S, H}, DType::F32);
      ops::residual_norm_modulate(ctx, x, a, &hf);
    }
    ops::observe(ctx, {"hidden_block{}", i}, x);
    if (i == 0) ops::observe(ctx, {models::kStackBlock0}, x);
  }
  ops::observe_mut(ctx, {models::kStackOutput}, x);
  if (skipped) {
    h = Tensor();
    hf = ctx.empty({S, H}, DType::F32);
    ops::residual_norm_modulate(ctx, x, final_norm, &hf);
  }
  ops::observe(ctx, {"final_adaln"}, tab.final);
  // Heads in fp32 on every row, then row selection with the update masks (keyframe rows are not
  // predicted).
  const Tensor video_all =
      ops::linear(ctx, hf, w_.video_out_weight, &w_.video_out_bias, DType::F32);
  const Tensor audio_all =
      ops::linear(ctx, hf, w_.audio_out_weight, &w_.audio_out_bias, DType::F32);
  ops::observe(ctx, {"final_video_all"}, video_all);
  ops::observe(ctx, {"final_audio_all"}, audio_all);
  H3Outputs o{ctx.empty({n_img, c.video_patch_dim()}, DType::F32),
              ctx.empty({n_audio, c.audio_latents_dim}, DType::F32)};
  ops::gather_rows_masked(ctx, video_all, p.img_pos, p.update_mask, o.video);
  ops::gather_rows_masked(ctx, audio_all, p.audio_pos, p.update_audio_mask, o.audio);
  return o;
}

}  // namespace avdit::models::h3
