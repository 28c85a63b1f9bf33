// forward_from_inputs and H3Stepper: unpacked latents -> packing -> H3Model::forward -> unpacked
// outputs. Only the unpacked tensors are read; the fixture's packed tensors are for debugging.
#include "models/h3/api.h"

#include <fmt/format.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/h3/dump.h"
#include "models/h3/packing.h"
#include "ops/rows.h"

namespace avdit::models::h3 {
namespace {

const Tensor* find(const TensorMap& m, const char* name) {
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

const Tensor& need(const TensorMap& m, const char* name) {
  const Tensor* t = find(m, name);
  AVDIT_REQUIRE(t != nullptr, "H3 inputs: missing tensor '{}'", name);
  return *t;
}

float scalar(const Tensor& t, const char* name) {
  AVDIT_REQUIRE(t.numel() == 1, "H3 inputs: '{}' must hold one value, found shape {}", name,
                t.shape_str());
  const Tensor v = t.to_f32();
  return v.f32()[0];
}

std::vector<int64_t> int_list(const Tensor& t, const char* name) {
  AVDIT_REQUIRE(t.ndim() == 1 && (t.dtype() == DType::I64 || t.dtype() == DType::I32),
                "H3 inputs: '{}' must be a 1-D I64 tensor, found {} {}", name,
                dtype_name(t.dtype()), t.shape_str());
  const Tensor v = t.to(DType::I64);
  return {v.data<int64_t>(), v.data<int64_t>() + v.numel()};
}

// t for one modality: t_<m> when given, else 1 - sigma_<m>.
float timestep_input(const TensorMap& in, const char* t_name, const char* sigma_name) {
  if (const Tensor* t = find(in, t_name)) return scalar(*t, t_name);
  const Tensor* s = find(in, sigma_name);
  AVDIT_REQUIRE(s != nullptr, "H3 inputs: need '{}' or '{}'", t_name, sigma_name);
  return timestep_from_sigma(scalar(*s, sigma_name));
}

Tensor ints(const std::vector<int64_t>& v, DType dtype = DType::I64) {
  return Tensor::from_data({static_cast<int64_t>(v.size())}, DType::I64, v.data()).to(dtype);
}

Tensor bools(const std::vector<uint8_t>& v) {
  return Tensor::from_data({static_cast<int64_t>(v.size())}, DType::Bool, v.data());
}

struct Problem {
  PackedLayout layout;
  PackedTimesteps timesteps;
  Tensor video_rows;  // [n_img, 96]: keyframe rows, then target rows
  Tensor audio_rows;  // [2 T_a, 32]
};

// Checks the latents against the config and builds the packed problem.
Problem make_problem(const H3Config& c, const Tensor& video_latent_any,
                     const Tensor& audio_latent_any, int64_t text_len, float t_video, float t_audio,
                     const std::vector<int64_t>& text_tags, const Tensor& cond_latent_any,
                     const std::vector<int64_t>& keyframes) {
  const Tensor video = video_latent_any.to_f32();
  const Tensor audio = audio_latent_any.to_f32();
  AVDIT_REQUIRE(video.ndim() == 5 && video.size(0) == 1 && video.size(1) == c.latents_dim,
                "H3: video_latent must be [1, {}, T, H, W], found {}", c.latents_dim,
                video.shape_str());
  AVDIT_REQUIRE(
      audio.ndim() == 3 && audio.size(0) == kAudioChannels && audio.size(1) == c.audio_latents_dim,
      "H3: audio_latent must be [2, {}, T_audio], found {}", c.audio_latents_dim,
      audio.shape_str());
  Problem p;
  p.layout = pack_layout(text_len, video.size(2), video.size(3), video.size(4), audio.size(2),
                         keyframes, text_tags);
  p.timesteps = pack_timesteps(p.layout, t_video, t_audio);
  p.video_rows = patchify_video(video);
  if (!keyframes.empty()) {
    AVDIT_REQUIRE(cond_latent_any.defined(), "H3: keyframe indices given without cond_latent");
    const Tensor cond = cond_latent_any.to_f32();
    AVDIT_REQUIRE(cond.ndim() == 5 && cond.size(0) == 1 && cond.size(1) == c.latents_dim &&
                      cond.size(2) == static_cast<int64_t>(keyframes.size()) &&
                      cond.size(3) == video.size(3) && cond.size(4) == video.size(4),
                  "H3: cond_latent must be [1, {}, {} keyframes, {}, {}], found {}", c.latents_dim,
                  keyframes.size(), video.size(3), video.size(4), cond.shape_str());
    const Tensor cond_rows = patchify_video(cond);
    Tensor rows =
        Tensor::empty({cond_rows.size(0) + p.video_rows.size(0), cond_rows.size(1)}, DType::F32);
    std::copy_n(cond_rows.f32(), cond_rows.numel(), rows.f32());
    std::copy_n(p.video_rows.f32(), p.video_rows.numel(), rows.f32() + cond_rows.numel());
    p.video_rows = rows;
  } else {
    AVDIT_REQUIRE(!cond_latent_any.defined(),
                  "H3: cond_latent given without keyframe_frame_indices");
  }
  p.audio_rows = pack_audio(audio);
  return p;
}

}  // namespace

TensorMap packing_tensors(const PackedLayout& l, const PackedTimesteps& ts) {
  TensorMap m;
  m["img_position_ids"] = Tensor::from_data({1, l.seq_len, 3}, DType::F64, l.positions.data());
  m["token_tags"] = ints(l.token_tags);
  m["input_ids"] = ints(l.input_ids);
  m["inverse_indices"] = ints(ts.inverse);
  m["unique_timesteps"] = Tensor::from_floats(ts.unique, {static_cast<int64_t>(ts.unique.size())});
  m["combined_indices"] = ints(adaln_rows(l, ts));
  m["cu_seqlens"] = ints(l.cu_seqlens, DType::I32);
  m["refiner_cu_seqlens"] = ints(l.refiner_cu_seqlens, DType::I32);
  m["img_pos"] = ints(l.img_pos);
  m["img_pos_for_infer_output"] = ints(l.img_pos);
  m["audio_pos"] = ints(l.audio_pos);
  m["text_pos"] = ints(l.text_pos);
  m["update_mask"] = bools(l.update_mask);
  m["update_audio_mask"] = bools(l.update_audio_mask);
  m["seq_len"] = ints({l.seq_len});
  m["used_len"] = ints({l.used_len});
  m["max_seqlen"] = ints({l.used_len});
  if (!l.condition_img_pos.empty()) {
    m["condition_img_pos"] = ints(l.condition_img_pos);
    m["target_img_pos"] = ints(l.target_img_pos);
    m["keyframe_temporal_positions"] =
        Tensor::from_data({static_cast<int64_t>(l.keyframe_temporal_positions.size())}, DType::F64,
                          l.keyframe_temporal_positions.data());
  }
  return m;
}

TensorMap forward_from_inputs(const H3Model& model, const TensorMap& in, bool dump) {
  const H3Config& c = model.config();
  ops::Context& ctx = model.ctx();
  std::vector<int64_t> text_tags, keyframes;
  if (const Tensor* t = find(in, "text_token_tags")) text_tags = int_list(*t, "text_token_tags");
  if (const Tensor* k = find(in, "keyframe_frame_indices"))
    keyframes = int_list(*k, "keyframe_frame_indices");
  const Tensor* cond = find(in, "cond_latent");
  AVDIT_REQUIRE(cond == nullptr || !keyframes.empty(),
                "H3 inputs: 'cond_latent' needs 'keyframe_frame_indices' (0 first, -1 last)");

  DumpProbe probe(c);
  const ProbeScope scope(ctx.observer(), dump ? &probe : nullptr);
  const Tensor text_refined = model.refine_text(need(in, "text_embeds"));
  const Tensor& video_latent = need(in, "video_latent");
  const Problem p = make_problem(c, video_latent, need(in, "audio_latent"), text_refined.size(0),
                                 timestep_input(in, "t_video", "sigma_video"),
                                 timestep_input(in, "t_audio", "sigma_audio"), text_tags,
                                 cond ? *cond : Tensor(), keyframes);
  const H3Plan plan = model.plan(p.layout);
  const H3Tables tables = model.tables(p.timesteps.unique);
  const H3Outputs o =
      model.forward(plan, tables, ops::index_tensor(ctx, adaln_rows(p.layout, p.timesteps)),
                    ops::index_tensor(ctx, p.timesteps.inverse), text_refined,
                    ctx.upload(p.video_rows), ctx.upload(p.audio_rows));
  TensorMap out = std::move(probe.tensors());
  out["video_out"] = ctx.download(o.video).to_f32();
  out["audio_out"] = ctx.download(o.audio).to_f32();
  const PackedLayout& l = p.layout;
  out["video_out_latent"] =
      unpatchify_video(out["video_out"].slice_rows(l.condition_rows, out["video_out"].size(0)),
                       c.latents_dim, l.latent_t, l.latent_h, l.latent_w);
  out["audio_out_latent"] = unpack_audio(out["audio_out"], l.audio_t);
  if (dump) {
    out.merge(packing_tensors(l, p.timesteps));
    out["video_rows"] = p.video_rows;
    out["audio_rows"] = p.audio_rows;
  }
  return out;
}

Velocity H3Stepper::velocity(const VelocityRequest& r) {
  const H3Model& m = model_;
  const H3Config& c = m.config();
  ops::Context& ctx = m.ctx();
  AVDIT_REQUIRE(r.text_refined.defined() && r.text_refined.ndim() == 2,
                "H3 velocity: text_refined [L, H] from H3Model::refine_text is required");
  const Tensor video = ctx.upload(r.video_latent), audio = ctx.upload(r.audio_latent);
  AVDIT_REQUIRE(video.ndim() == 5 && video.size(0) == 1 && video.size(1) == c.latents_dim &&
                    video.dtype() == DType::F32,
                "H3: video_latent must be F32 [1, {}, T, H, W], found {} {}", c.latents_dim,
                dtype_name(video.dtype()), video.shape_str());
  AVDIT_REQUIRE(audio.ndim() == 3 && audio.size(0) == kAudioChannels &&
                    audio.size(1) == c.audio_latents_dim && audio.dtype() == DType::F32,
                "H3: audio_latent must be F32 [2, {}, T_audio], found {} {}", c.audio_latents_dim,
                dtype_name(audio.dtype()), audio.shape_str());
  const int64_t C = c.latents_dim, T = video.size(2), H = video.size(3), W = video.size(4),
                Ta = audio.size(2);
  const PackedLayout layout =
      pack_layout(r.text_refined.size(0), T, H, W, Ta, r.keyframe_frame_indices, r.text_token_tags);
  const PackedTimesteps ts = pack_timesteps(layout, timestep_from_sigma(r.sigma_video),
                                            timestep_from_sigma(r.sigma_audio));
  if (!plan_ || plan_->layout.positions != layout.positions ||
      plan_->layout.cu_seqlens != layout.cu_seqlens || plan_->layout.text_pos != layout.text_pos ||
      plan_->layout.img_pos != layout.img_pos || plan_->layout.audio_pos != layout.audio_pos ||
      plan_->layout.update_mask != layout.update_mask) {
    plan_.emplace(m.plan(layout));
    ++plan_generation_;
  }
  const H3Tables* tables = nullptr;
  for (const auto& [key, t] : tables_)
    if (key == ts.unique) tables = &t;
  if (!tables) {
    if (tables_.size() >= 2) tables_.erase(tables_.begin());
    tables_.emplace_back(ts.unique, m.tables(ts.unique));
    tables = &tables_.back().second;
  }
  // Packing on the context: element indices built once per shape.
  if (video.shape() != video_shape_) {
    video_shape_ = video.shape();
    patchify_ = ops::index_tensor(ctx, patchify_video_index(C, T, H, W));
    unpatchify_ = ops::index_tensor(ctx, unpatchify_video_index(C, T, H, W));
  }
  if (audio.shape() != audio_shape_) {
    audio_shape_ = audio.shape();
    pack_audio_ = ops::index_tensor(ctx, pack_audio_index(c.audio_latents_dim, Ta));
    unpack_audio_ = ops::index_tensor(ctx, unpack_audio_index(c.audio_latents_dim, Ta));
  }
  const int64_t Vd = c.video_patch_dim(), n_target = T * (H / 2) * (W / 2);
  Tensor cond;
  if (!r.keyframe_frame_indices.empty()) {
    AVDIT_REQUIRE(r.cond_latent.defined(), "H3: keyframe indices given without cond_latent");
    cond = ctx.upload(r.cond_latent);
    AVDIT_REQUIRE(cond.ndim() == 5 && cond.size(0) == 1 && cond.size(1) == C &&
                      cond.size(2) == static_cast<int64_t>(r.keyframe_frame_indices.size()) &&
                      cond.size(3) == H && cond.size(4) == W && cond.dtype() == DType::F32,
                  "H3: cond_latent must be F32 [1, {}, {} keyframes, {}, {}], found {}", C,
                  r.keyframe_frame_indices.size(), H, W, cond.shape_str());
    if (cond.shape() != cond_shape_) {
      cond_shape_ = cond.shape();
      patchify_cond_ = ops::index_tensor(ctx, patchify_video_index(C, cond.size(2), H, W));
    }
  } else {
    AVDIT_REQUIRE(!r.cond_latent.defined(), "H3: cond_latent given without keyframe_frame_indices");
  }
  // The call's inputs into the fixed slots (remade, with a new generation, when a size changes).
  bool remade = false;
  auto slot = [&](Tensor& t, const Shape& shape, DType dt) {
    if (!t.defined() || t.shape() != shape || t.dtype() != dt) {
      t = ctx.empty(shape, dt);
      remade = true;
    }
    return t;
  };
  const Tensor text = ctx.upload(r.text_refined);
  const int64_t S = layout.seq_len;
  slot(slots_.video, video.shape(), DType::F32);
  slot(slots_.audio, audio.shape(), DType::F32);
  if (cond.defined()) slot(slots_.cond, cond.shape(), DType::F32);
  slot(slots_.text, text.shape(), m.act());
  slot(slots_.mod_rows, {S}, DType::I32);
  slot(slots_.inverse, {S}, DType::I32);
  slot(slots_.tables, tables->storage.shape(), tables->storage.dtype());
  slot(slots_.out_video, video.shape(), DType::F32);
  slot(slots_.out_audio, audio.shape(), DType::F32);
  if (remade || plan_generation_ != plan_seen_) {
    ctx.forget_fixed();
    ++generation_;
    plan_seen_ = plan_generation_;
  }
  ops::copy_(ctx, slots_.video, video);
  ops::copy_(ctx, slots_.audio, audio);
  if (cond.defined()) ops::copy_(ctx, slots_.cond, cond);
  ops::copy_(ctx, slots_.text, text);
  ops::copy_(ctx, slots_.mod_rows, ops::index_tensor(ctx, adaln_rows(layout, ts)));
  ops::copy_(ctx, slots_.inverse, ops::index_tensor(ctx, ts.inverse));
  ops::copy_(ctx, slots_.tables, tables->storage);
  const H3Tables fixed_tables = tables->over(slots_.tables);
  const int64_t n_cond = cond.defined() ? cond.size(2) * (H / 2) * (W / 2) : 0;
  ctx.run_fixed(generation_, [&] {
    Tensor video_rows = ctx.empty({n_target, Vd}, DType::F32);
    ops::gather_elements(ctx, slots_.video, patchify_, video_rows);
    if (n_cond > 0) {
      Tensor cond_rows = ctx.empty({n_cond, Vd}, DType::F32);
      ops::gather_elements(ctx, slots_.cond, patchify_cond_, cond_rows);
      video_rows = ops::concat_rows(ctx, {cond_rows, video_rows});
    }
    Tensor audio_rows = ctx.empty({kAudioChannels * Ta, c.audio_latents_dim}, DType::F32);
    ops::gather_elements(ctx, slots_.audio, pack_audio_, audio_rows);
    const H3Outputs o = m.forward(*plan_, fixed_tables, slots_.mod_rows, slots_.inverse,
                                  slots_.text, video_rows, audio_rows);
    ops::gather_elements(ctx, o.video.slice_rows(layout.condition_rows, o.video.size(0)),
                         unpatchify_, slots_.out_video);
    ops::gather_elements(ctx, o.audio, unpack_audio_, slots_.out_audio);
  });
  // Copies: the next call (the CFG pass, the next step) writes the slots again.
  return {ops::clone(ctx, slots_.out_video), ops::clone(ctx, slots_.out_audio)};
}

}  // namespace avdit::models::h3
