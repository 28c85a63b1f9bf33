// The Wan2.2 VAE decode, step by step as WanVAE_.decode and Decoder3d compute it (the golden
// README's "Decode procedure"). Named points carry the golden's intermediate names.
#include "models/vae/wan22/decoder.h"

#include <fmt/format.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/wan22/latent_stats.h"
#include "models/vae/wan22/patch.h"
#include "ops/activation.h"
#include "ops/context.h"
#include "ops/rows.h"
#include "ops/space_shuffle3d.h"

namespace avdit::models::vae::wan22 {
namespace {

// DupUp3D(in, out, f_t, f_s = 2): channels repeated, then spread over f_t frames and 2x2 pixels;
// the first chunk drops its first f_t - 1 frames.
Tensor dup_up(ops::Context& ctx, const Tensor& x, int64_t out, int64_t ft, bool first_chunk) {
  const int64_t fs = 2, factor = ft * fs * fs;
  const int64_t in = x.size(3), repeats = out * factor / in;
  AVDIT_CHECK(out * factor % in == 0, "DupUp3D {} -> {}", in, out);
  Tensor y = ops::channels_to_space3d(ctx, x, {ft, fs, out, factor, fs * fs, fs, 1, repeats});
  return first_chunk && ft > 1 ? y.slice_rows(ft - 1, y.size(0)) : y;
}

// Resample upsample2d / upsample3d. In time: on the first call time_conv is skipped and its slot
// becomes two zero frames (the reference's "Rep" marker, which later calls read as zero padding);
// then each frame becomes two, frame 2t + j taking channels [jC, (j+1)C) of time_conv's output.
Tensor resample(ops::Context& ctx, const UpStageWeights& s, const Tensor& x, FeatureCache& cache) {
  Tensor y = x;
  if (s.resample == Resample::Up3d) {
    Tensor& slot = cache.slot();
    if (!slot.defined()) {
      slot = ctx.zeros({kCacheFrames, x.size(1), x.size(2), x.size(3)}, x.dtype());
    } else {
      const Tensor t = causal_conv(ctx, s.time_conv, x, slot);
      const int64_t c = x.size(3);
      y = ops::channels_to_space3d(ctx, t, {2, 1, c, 1, c, 0, 0, 1});
    }
  }
  // Per frame: nearest-exact x2 (an exact copy at scale 2), Conv2d 3x3 with zero padding 1.
  return conv(ctx, s.resample_conv, ops::upsample_nearest2x(ctx, y));
}

// Decoder3d on one chunk x [t, h, w, 48] (after conv2).
Tensor decoder3d(ops::Context& ctx, const DecoderWeights& w, const Tensor& x_in,
                 FeatureCache& cache, bool first_chunk, ChunkPoints& points) {
  Tensor x = causal_conv(ctx, w.conv1, x_in, cache);
  points.add({"after_decoder_conv1"}, x);
  x = residual_block(ctx, w.middle0, x, cache);
  x = attention_block(ctx, w.middle1, x);
  x = residual_block(ctx, w.middle2, x, cache);
  points.add({"after_middle"}, x);
  for (size_t i = 0; i < w.upsamples.size(); ++i) {
    const UpStageWeights& s = w.upsamples[i];
    Tensor main = x;
    for (const ResidualBlockWeights& b : s.blocks) main = residual_block(ctx, b, main, cache);
    if (s.resample != Resample::None) {
      main = resample(ctx, s, main, cache);
      const int64_t ft = s.resample == Resample::Up3d ? 2 : 1;
      ops::add_(ctx, main, dup_up(ctx, x, s.out, ft, first_chunk));
    }
    x = main;
    points.add({"after_up{}", static_cast<int64_t>(i)}, x);
  }
  x = ops::silu(ctx, rms_norm(ctx, x, w.head_gamma), w.head.w.dtype());
  return causal_conv(ctx, w.head, x, cache);
}

}  // namespace

Wan22Decoder::Wan22Decoder(ops::Context& ctx, const Checkpoint& ckpt, int64_t frames_per_call,
                           DType act)
    : ctx_(ctx),
      act_(require_act(act, "Wan2.2 VAE decoder")),
      w_(load_decoder_weights(ctx, ckpt, act)),
      frames_per_call_(frames_per_call) {
  AVDIT_REQUIRE(frames_per_call >= 1, "Wan2.2 VAE decoder: frames per call must be >= 1, got {}",
                frames_per_call);
}

std::string Wan22Decoder::describe() const {
  return fmt::format("Wan2.2 VAE decoder, z48 (width {}, {} stages, {}, {})", w_.conv1.out(),
                     w_.upsamples.size(), ctx_.name(), dtype_name(act_));
}

Tensor Wan22Decoder::decode(const Tensor& latents) const {
  return frames_to_video(ctx_.download(decode_frames(latents)));
}

Tensor Wan22Decoder::decode_frames(const Tensor& latents) const {
  ops::Context& ctx = ctx_;
  const Tensor z = ctx.upload(denormalize_latents(latents, "Wan2.2 VAE decoder: latents"));
  ops::observe(ctx, {"latent_denorm"}, z);
  // The de-normalisation stays float32 (autocast leaves it); conv2 reads it in act.
  const Tensor x = conv(ctx, w_.conv2, ops::cast(ctx, z, act_));
  ops::observe(ctx, {"after_conv2"}, x);
  // The first call holds exactly one latent frame (the "Rep" marker and the DupUp3D trim act on
  // it); later calls carry frames_per_call frames with the cache of everything before.
  FeatureCache cache;
  ChunkPoints points(ctx);
  std::vector<Tensor> outs;  // each call's frames, channel-last RGB (a quarter of its activations)
  const int64_t T = x.size(0);
  for (int64_t t0 = 0; t0 < T;) {
    const int64_t t1 = t0 == 0 ? 1 : std::min(T, t0 + frames_per_call_);
    cache.next = 0;
    const Tensor out = decoder3d(ctx, w_, x.slice_rows(t0, t1), cache, t0 == 0, points);
    outs.push_back(patches_to_frames(ctx, out));
    t0 = t1;
  }
  points.emit();
  return ops::concat_rows(ctx, outs);
}

}  // namespace avdit::models::vae::wan22

namespace avdit::models::vae {

std::unique_ptr<Decoder> open_wan22_decoder(ops::Context& ctx, const std::filesystem::path& dir,
                                            DType act) {
  std::error_code ec;
  AVDIT_REQUIRE(std::filesystem::is_directory(dir, ec),
                "Wan2.2 VAE decoder {}: not a folder (the VAE's folder with model.safetensors is "
                "needed)",
                dir.string());
  const Checkpoint ckpt = Checkpoint::open(dir, [](std::string_view name) {
    return name.starts_with("conv2.") || name.starts_with("decoder.");
  });
  return std::make_unique<wan22::Wan22Decoder>(ctx, ckpt, 1, act);
}

}  // namespace avdit::models::vae
