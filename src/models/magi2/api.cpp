// forward_from_inputs and Magi2Stepper: unpacked inputs -> packing -> Magi2Model::forward ->
// unpacked outputs (see api.h).
#include "models/magi2/api.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/magi2/dump.h"
#include "ops/rows.h"

namespace avdit::models::magi2 {
namespace {

// One forward with the time embedding already on the context (or undefined when its dim is 0).
TensorMap forward_with_time(const Magi2Model& model, const PackedSequence& packed,
                            const Tensor& time, bool dump) {
  ops::Context& ctx = model.ctx();
  DumpProbe probe;
  const ProbeScope scope(ctx.observer(), dump ? &probe : nullptr);
  AVDIT_REQUIRE(
      packed.x.defined() && packed.x.size(0) == static_cast<int64_t>(packed.modality.size()),
      "magi2 forward: {} modality ids for {} tokens", packed.modality.size(), packed.tokens());
  const Magi2Plan plan = model.plan(packed.modality, packed.coords, packed.cu_seqlens);
  const Tensor out = model.forward(plan, packed.x, time);
  TensorMap result = std::move(probe.tensors());
  result["model_output"] = ctx.download(out).to_f32();
  if (dump) {
    Tensor sizes = Tensor::empty({3}, DType::I32);
    for (int m = 0; m < 3; ++m)
      sizes.data<int32_t>()[m] = static_cast<int32_t>(plan.layout.size[m]);
    result["modality_group_sizes"] = sizes;
  }
  return result;
}

}  // namespace

Magi2Config config_from_checkpoint(const Checkpoint& ckpt) {
  const nlohmann::json* cfg = ckpt.config();
  AVDIT_REQUIRE(cfg != nullptr,
                "{}: no config.json next to the checkpoint (the MAGI-2 preview needs its config)",
                ckpt.source().string());
  AVDIT_REQUIRE(is_magi2_config(*cfg),
                "{}: config.json is not a MAGI-2 preview config (no arch_config with moe_config)",
                ckpt.source().string());
  return parse_magi2_config(*cfg);
}

TensorMap forward_packed(const Magi2Model& model, const PackedSequence& packed, bool dump) {
  Tensor time;
  if (model.config().data_proxy.time_channel_dim > 0) {
    AVDIT_REQUIRE(packed.time_tokens.defined() || packed.per_token_t.defined(),
                  "magi2 forward: neither time_token_sequence nor per_token_t is given");
    time = packed.time_tokens.defined() ? packed.time_tokens
                                        : model.time_embedding(packed.per_token_t);
  }
  return forward_with_time(model, packed, time, dump);
}

TensorMap forward_from_inputs(const Magi2Model& model, const TensorMap& inputs, bool dump) {
  ops::Context& ctx = model.ctx();
  PackedSequence packed = pack_inputs(model.config(), inputs);
  // The time embedding on the model's context (the GPU's own kernel there), as the sampler computes
  // it.
  Tensor time;
  if (model.config().data_proxy.time_channel_dim > 0) {
    time = model.time_embedding(packed.per_token_t);
    if (dump) packed.time_tokens = ctx.download(time).to_f32();
  }
  TensorMap out = forward_with_time(model, packed, time, dump);
  add_unpacked_outputs(model.config(), packed, dump, out);
  return out;
}

void add_unpacked_outputs(const Magi2Config& config, const PackedSequence& packed, bool dump,
                          TensorMap& out) {
  Tensor video, audio;
  unpack_outputs(config, packed, out.at("model_output"), video, audio);
  out["video_velocity"] = video;
  out["audio_velocity"] = audio;
  if (dump) {
    const int64_t L = packed.tokens();
    out["x"] = packed.x;
    out["coords_mapping"] = packed.coords;
    Tensor modality = Tensor::empty({L}, DType::I32);
    for (int64_t l = 0; l < L; ++l) modality.data<int32_t>()[l] = packed.modality[l];
    out["modality_mapping"] = modality;
    const int64_t nb = static_cast<int64_t>(packed.cu_seqlens.size());
    Tensor cu = Tensor::empty({nb}, DType::I32);
    for (int64_t i = 0; i < nb; ++i)
      cu.data<int32_t>()[i] = static_cast<int32_t>(packed.cu_seqlens[i]);
    out["cu_seqlens_q"] = cu;
    out["per_token_t"] = packed.per_token_t;
    out["time_token_sequence"] = packed.time_tokens;
  }
}

Magi2Stepper::Magi2Stepper(const Magi2Model& model, const std::vector<Tensor>& texts,
                           const Tensor& freqs)
    : model_(model), freqs_(freqs) {
  const int64_t Ct = model.config().text_in_channels;
  AVDIT_REQUIRE(!texts.empty(), "magi2 stepper: no text items");
  std::vector<Tensor> rows;
  for (const Tensor& t_any : texts) {
    Tensor t = model.ctx().download(t_any);
    if (t.ndim() == 3 && t.size(0) == 1) t = t.reshape({t.size(1), t.size(2)});
    AVDIT_REQUIRE(t.ndim() == 2 && t.size(1) == Ct && dtype_is_float(t.dtype()),
                  "magi2 stepper: text features {} {} (expected a float [L, {}])",
                  dtype_name(t.dtype()), t.shape_str(), Ct);
    text_lens_.push_back(t.size(0));
    text_rows_ = std::max(text_rows_, t.size(0));
    rows.push_back(t.to_f32());
  }
  const int64_t B = static_cast<int64_t>(rows.size());
  text_ = Tensor::zeros({B, text_rows_, Ct}, DType::F32);
  for (int64_t b = 0; b < B; ++b)
    if (rows[b].numel() > 0)
      std::memcpy(text_.f32() + b * text_rows_ * Ct, std::as_const(rows[b]).f32(),
                  rows[b].nbytes());
}

std::vector<std::array<Tensor, 2>> Magi2Stepper::velocity(const Tensor& video_any,
                                                          const Tensor& audio_any, float t) {
  const Magi2Model& m = model_;
  const Magi2Config& c = m.config();
  ops::Context& ctx = m.ctx();
  const Tensor video = ctx.upload(video_any), audio = ctx.upload(audio_any);
  AVDIT_REQUIRE(video.dtype() == DType::F32 && audio.dtype() == DType::F32,
                "magi2 stepper: latents must be F32, found {} and {}", dtype_name(video.dtype()),
                dtype_name(audio.dtype()));
  prepare(video.shape(), audio.shape());
  // Per step: the latents into the source, one gather into the packed rows, the per-token times.
  const int64_t V = video.numel(), A = audio.numel(), L = plan_->tokens();
  Tensor dst_v = source_.slice_rows(0, V), dst_a = source_.slice_rows(V, V + A);
  ops::copy_(ctx, dst_v, video);
  ops::copy_(ctx, dst_a, audio);
  Tensor x = ctx.empty({L, c.max_in_channels}, DType::F32);
  ops::gather_elements(ctx, source_, x_index_, x);
  Tensor time;
  if (c.data_proxy.time_channel_dim > 0) {
    std::vector<float> per_token(noisy_.size());
    for (size_t l = 0; l < noisy_.size(); ++l) per_token[l] = noisy_[l] != 0 ? t : 0.0f;
    time = m.time_embedding(Tensor::from_floats(per_token, {L}), freqs_);
  }
  const Tensor out = m.forward(*plan_, x, time);
  std::vector<std::array<Tensor, 2>> v;
  for (size_t b = 0; b < video_out_.size(); ++b) {
    std::array<Tensor, 2> item{ctx.empty(video_shape_, DType::F32),
                               ctx.empty(audio_shape_, DType::F32)};
    ops::gather_elements(ctx, out, video_out_[b], item[0]);
    ops::gather_elements(ctx, out, audio_out_[b], item[1]);
    v.push_back(item);
  }
  return v;
}

const PackedSequence& Magi2Stepper::layout(const Shape& video, const Shape& audio) {
  prepare(video, audio);
  return index_->layout;
}

void Magi2Stepper::prepare(const Shape& video, const Shape& audio) {
  const Magi2Model& m = model_;
  const Magi2Config& c = m.config();
  ops::Context& ctx = m.ctx();
  if (!index_ || video != video_shape_ || audio != audio_shape_) {
    // Once per latent shape: the packing indices, the plan, the source buffer with the texts in it.
    video_shape_ = video;
    audio_shape_ = audio;
    index_.emplace(packing_index(c, video_shape_, audio_shape_, text_lens_, text_rows_));
    const PackedSequence& l = index_->layout;
    plan_.emplace(m.plan(l.modality, l.coords, l.cu_seqlens));
    x_index_ = ops::index_tensor(ctx, index_->x);
    source_ = ctx.zeros({index_->source_size}, DType::F32);
    const int64_t va = shape_numel(video) + shape_numel(audio);
    Tensor texts = source_.slice_rows(va, va + text_.numel());
    ops::copy_(ctx, texts, ctx.upload(text_.reshape({text_.numel()})));
    video_out_.clear();
    audio_out_.clear();
    for (size_t b = 0; b < text_lens_.size(); ++b) {
      video_out_.push_back(ops::index_tensor(ctx, index_->video_out[b]));
      audio_out_.push_back(ops::index_tensor(ctx, index_->audio_out[b]));
    }
    noisy_.assign(index_->noisy.begin(), index_->noisy.end());
  }
}

}  // namespace avdit::models::magi2
