// Unpacked inputs -> packing (models/h3/packing.h, shared with the CPU path) -> H3CudaModel.
#include "backend/cuda/models/h3/api_cuda.h"

#include "core/error.h"
#include "models/h3/packing.h"
#include "ops/ops.h"

namespace avdit::cuda::h3 {
namespace mh = ::avdit::models::h3;
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
  AVDIT_REQUIRE(t.numel() == 1, "H3 inputs: '{}' must hold one value, found shape {}", name, t.shape_str());
  // A const copy: a mapped (read-only) input must be read through the const accessor.
  const Tensor v = t.to_f32();
  return v.f32()[0];
}

std::vector<int64_t> int_list(const Tensor& t, const char* name) {
  AVDIT_REQUIRE(t.ndim() == 1 && (t.dtype() == DType::I64 || t.dtype() == DType::I32),
                "H3 inputs: '{}' must be a 1-D I64 tensor, found {} {}", name, dtype_name(t.dtype()), t.shape_str());
  const Tensor v = t.to(DType::I64);
  return {v.data<int64_t>(), v.data<int64_t>() + v.numel()};
}

float timestep_input(const TensorMap& in, const char* t_name, const char* sigma_name) {
  if (const Tensor* t = find(in, t_name)) return scalar(*t, t_name);
  const Tensor* s = find(in, sigma_name);
  AVDIT_REQUIRE(s != nullptr, "H3 inputs: need '{}' or '{}'", t_name, sigma_name);
  return mh::timestep_from_sigma(scalar(*s, sigma_name));
}

struct Problem {
  mh::PackedLayout layout;
  mh::PackedTimesteps timesteps;
  Tensor video_rows, audio_rows;
};

Problem make_problem(const mh::H3Config& c, const Tensor& video_any, const Tensor& audio_any, int64_t text_len,
                     float t_video, float t_audio, const std::vector<int64_t>& tags, const Tensor& cond_any,
                     const std::vector<int64_t>& keyframes) {
  const Tensor video = video_any.to_f32(), audio = audio_any.to_f32();
  AVDIT_REQUIRE(video.ndim() == 5 && video.size(0) == 1 && video.size(1) == c.latents_dim,
                "H3: video_latent must be [1, {}, T, H, W], found {}", c.latents_dim, video.shape_str());
  AVDIT_REQUIRE(audio.ndim() == 3 && audio.size(0) == mh::kAudioChannels && audio.size(1) == c.audio_latents_dim,
                "H3: audio_latent must be [2, {}, T_audio], found {}", c.audio_latents_dim, audio.shape_str());
  Problem p;
  p.layout = mh::pack_layout(text_len, video.size(2), video.size(3), video.size(4), audio.size(2), keyframes, tags);
  p.timesteps = mh::pack_timesteps(p.layout, t_video, t_audio);
  p.video_rows = mh::patchify_video(video);
  if (!keyframes.empty()) {
    AVDIT_REQUIRE(cond_any.defined(), "H3: keyframe indices given without cond_latent");
    const Tensor cond = cond_any.to_f32();
    AVDIT_REQUIRE(cond.ndim() == 5 && cond.size(1) == c.latents_dim &&
                      cond.size(2) == static_cast<int64_t>(keyframes.size()) && cond.size(3) == video.size(3) &&
                      cond.size(4) == video.size(4),
                  "H3: cond_latent must be [1, {}, {} keyframes, {}, {}], found {}", c.latents_dim, keyframes.size(),
                  video.size(3), video.size(4), cond.shape_str());
    p.video_rows = ops::concat_rows({mh::patchify_video(cond), p.video_rows});
  } else {
    AVDIT_REQUIRE(!cond_any.defined(), "H3: cond_latent given without keyframe_frame_indices");
  }
  p.audio_rows = mh::pack_audio(audio);
  return p;
}

}  // namespace

TensorMap forward_from_inputs(H3CudaModel& model, const TensorMap& in, bool dump) {
  const mh::H3Config& c = model.config();
  std::vector<int64_t> tags, keyframes;
  if (const Tensor* t = find(in, "text_token_tags")) tags = int_list(*t, "text_token_tags");
  if (const Tensor* k = find(in, "keyframe_frame_indices")) keyframes = int_list(*k, "keyframe_frame_indices");
  const Tensor* cond = find(in, "cond_latent");
  AVDIT_REQUIRE(cond == nullptr || !keyframes.empty(),
                "H3 inputs: 'cond_latent' needs 'keyframe_frame_indices' (0 first, -1 last)");
  TensorMap out;
  TensorMap* dump_map = dump ? &out : nullptr;
  const Tensor text = model.refine_text(need(in, "text_embeds"), dump_map);
  const Problem p = make_problem(c, need(in, "video_latent"), need(in, "audio_latent"), text.size(0),
                                 timestep_input(in, "t_video", "sigma_video"),
                                 timestep_input(in, "t_audio", "sigma_audio"), tags, cond ? *cond : Tensor(), keyframes);
  const mh::PackedOutput o = model.forward(p.layout, p.timesteps, text, p.video_rows, p.audio_rows, dump_map);
  const mh::PackedLayout& l = p.layout;
  out["video_out"] = o.video_out;
  out["audio_out"] = o.audio_out;
  out["video_out_latent"] = mh::unpatchify_video(o.video_out.slice_rows(l.condition_rows, o.video_out.size(0)),
                                                 c.latents_dim, l.latent_t, l.latent_h, l.latent_w);
  out["audio_out_latent"] = mh::unpack_audio(o.audio_out, l.audio_t);
  if (dump) out.merge(mh::packing_tensors(l, p.timesteps));
  return out;
}

mh::Velocity velocity(H3CudaModel& model, const mh::VelocityRequest& r) {
  const mh::H3Config& c = model.config();
  AVDIT_REQUIRE(r.text_refined.defined() && r.text_refined.ndim() == 2,
                "H3 velocity: text_refined [L, H] from refine_text is required");
  const Problem p = make_problem(c, r.video_latent, r.audio_latent, r.text_refined.size(0),
                                 mh::timestep_from_sigma(r.sigma_video), mh::timestep_from_sigma(r.sigma_audio),
                                 r.text_token_tags, r.cond_latent, r.keyframe_frame_indices);
  const mh::PackedOutput o = model.forward(p.layout, p.timesteps, r.text_refined, p.video_rows, p.audio_rows, nullptr);
  const mh::PackedLayout& l = p.layout;
  return {mh::unpatchify_video(o.video_out.slice_rows(l.condition_rows, o.video_out.size(0)), c.latents_dim,
                               l.latent_t, l.latent_h, l.latent_w),
          mh::unpack_audio(o.audio_out, l.audio_t)};
}

}  // namespace avdit::cuda::h3
