// The Wan2.2 VAE encode, step by step as WanVAE_.encode and Encoder3d compute it (the golden
// README's "Encode procedure"). Named points carry the golden's intermediate names.
#include "models/vae/wan22/encoder.h"

#include <fmt/format.h>

#include "core/dtype.h"
#include "core/error.h"
#include "io/finite.h"
#include "io/safetensors.h"
#include "models/vae/wan22/latent_stats.h"
#include "models/vae/wan22/patch.h"
#include "ops/activation.h"
#include "ops/context.h"
#include "ops/rows.h"
#include "ops/space_shuffle3d.h"

namespace avdit::models::vae::wan22 {
namespace {

// The reference's calls: one frame, then four per call.
constexpr int64_t kFramesPerCall = 4;

// AvgDown3D(in, out, f_t, f_s): zero frames in front up to a multiple of f_t (per call, as the
// reference pads each chunk; they count in the mean), then the grouped mean of f_t x f_s x f_s.
Tensor avg_down(ops::Context& ctx, const Tensor& x, int64_t out, int64_t ft, int64_t fs) {
  if (ft == 1 && fs == 1 && x.size(3) == out) return x;
  const int64_t pad = (ft - x.size(0) % ft) % ft;
  const Tensor padded =
      pad ? ops::concat_rows(ctx, {ctx.zeros({pad, x.size(1), x.size(2), x.size(3)}, x.dtype()), x})
          : x;
  return ops::space_to_channels_mean3d(ctx, padded, {ft, fs, out}, x.dtype());
}

// Resample downsample2d / downsample3d. In space, per frame: one zero column on the right and row
// at the bottom, then a 3x3 stride-2 Conv2d. In time: the first call only keeps its frames in the
// slot; later calls convolve (last frame of the slot, chunk) with stride 2 and no padding.
Tensor downsample(ops::Context& ctx, const DownStageWeights& s, const Tensor& x,
                  FeatureCache& cache) {
  ops::Conv3dGeometry g;
  g.stride_h = g.stride_w = 2;
  g.pad_bottom = g.pad_right = 1;
  Tensor y =
      ops::conv3d(ctx, x, s.resample_conv.w, &s.resample_conv.b, g, s.resample_conv.w.dtype());
  if (!s.temporal) return y;
  Tensor& slot = cache.slot();
  if (!slot.defined()) {
    slot = ops::clone(ctx, y.slice_rows(y.size(0) - 1, y.size(0)));
    return y;
  }
  const Tensor input = ops::concat_rows(ctx, {slot, y});
  slot = ops::clone(ctx, y.slice_rows(y.size(0) - 1, y.size(0)));
  ops::Conv3dGeometry t;
  t.stride_t = 2;
  return ops::conv3d(ctx, input, s.time_conv.w, &s.time_conv.b, t, s.time_conv.w.dtype());
}

// Encoder3d on one call's frames x [t, h, w, 12] (patchified).
Tensor encoder3d(ops::Context& ctx, const EncoderWeights& w, const Tensor& x_in,
                 FeatureCache& cache, ChunkPoints& points) {
  Tensor x = causal_conv(ctx, w.conv1, x_in, cache);
  points.add({"after_enc_conv1"}, x);
  for (size_t i = 0; i < w.downsamples.size(); ++i) {
    const DownStageWeights& s = w.downsamples[i];
    Tensor main = x;
    for (const ResidualBlockWeights& b : s.blocks) main = residual_block(ctx, b, main, cache);
    if (s.down) main = downsample(ctx, s, main, cache);
    ops::add_(ctx, main, avg_down(ctx, x, s.out, s.temporal ? 2 : 1, s.down ? 2 : 1));
    x = main;
    points.add({"after_down{}", static_cast<int64_t>(i)}, x);
  }
  x = residual_block(ctx, w.middle0, x, cache);
  x = attention_block(ctx, w.middle1, x);
  x = residual_block(ctx, w.middle2, x, cache);
  points.add({"after_middle"}, x);
  x = ops::silu(ctx, rms_norm(ctx, x, w.head_gamma), w.head.w.dtype());
  x = causal_conv(ctx, w.head, x, cache);
  points.add({"after_head"}, x);
  return x;
}

}  // namespace

Wan22Encoder::Wan22Encoder(ops::Context& ctx, const Checkpoint& ckpt, DType act)
    : ctx_(ctx),
      act_(require_act(act, "Wan2.2 VAE encoder")),
      w_(load_encoder_weights(ctx, ckpt, act)) {}

std::string Wan22Encoder::describe() const {
  return fmt::format("Wan2.2 VAE encoder, z48 (width {}, {} stages, {}, {})", w_.conv1.out(),
                     w_.downsamples.size(), ctx_.name(), dtype_name(act_));
}

Tensor Wan22Encoder::preprocess(const Tensor& pixels) {
  AVDIT_REQUIRE(pixels.dtype() == DType::U8,
                "Wan2.2 VAE encoder: pixels have dtype {}, expected U8",
                dtype_name(pixels.dtype()));
  Tensor out = Tensor::empty(pixels.shape(), DType::F32);
  const auto* src = pixels.data<uint8_t>();
  float* dst = out.f32();
  for (int64_t i = 0; i < pixels.numel(); ++i) {
    const float a = static_cast<float>(src[i]) / 255.0f;
    dst[i] = bf16_to_f32(f32_to_bf16(2.0f * a - 1.0f));
  }
  return out;
}

Tensor Wan22Encoder::encode(const Tensor& video) const {
  ops::Context& ctx = ctx_;
  const char* what = "Wan2.2 VAE encoder: video";
  AVDIT_REQUIRE(video.ndim() == 5 && video.size(0) == 1 && video.size(1) == 3,
                "{} has shape {}, expected [1, 3, T, H, W]", what, video.shape_str());
  AVDIT_REQUIRE(video.size(2) >= 1 && video.size(3) > 0 && video.size(4) > 0 &&
                    video.size(3) % 16 == 0 && video.size(4) % 16 == 0,
                "{} has shape {}: needs at least one frame and H, W multiples of 16", what,
                video.shape_str());
  const Tensor v = video.to_f32();
  require_finite(v, what);
  // Frames past 1 + 4k are dropped, as the reference's loop never reaches them.
  const int64_t T = 1 + (video.size(2) - 1) / kFramesPerCall * kFramesPerCall;
  const Tensor x =
      ctx.upload(patchify(v.reshape({3, video.size(2), video.size(3), video.size(4)})).to(act_));
  FeatureCache cache;
  ChunkPoints points(ctx);
  std::vector<Tensor> outs;
  for (int64_t t0 = 0; t0 < T;) {
    const int64_t t1 = t0 == 0 ? 1 : t0 + kFramesPerCall;
    cache.next = 0;
    outs.push_back(encoder3d(ctx, w_, x.slice_rows(t0, t1), cache, points));
    t0 = t1;
  }
  points.emit();
  const Tensor h = conv(ctx, w_.quant, ops::concat_rows(ctx, outs));
  // mu = channels [0, 48); log_var is not used (no sampling). The normalisation is float32.
  const Tensor rows = h.reshape({h.numel() / h.size(3), h.size(3)});
  const Tensor mu = ops::take_columns(ctx, rows, 0, kLatentChannels)
                        .reshape({h.size(0), h.size(1), h.size(2), kLatentChannels});
  ops::observe(ctx, {"mu"}, mu);
  return normalize_latents(ctx.download(mu).to(DType::F32));
}

std::unique_ptr<Wan22Encoder> open_wan22_encoder(ops::Context& ctx,
                                                 const std::filesystem::path& dir, DType act) {
  std::error_code ec;
  AVDIT_REQUIRE(std::filesystem::is_directory(dir, ec),
                "Wan2.2 VAE encoder {}: not a folder (the VAE's folder with model.safetensors is "
                "needed)",
                dir.string());
  const Checkpoint ckpt = Checkpoint::open(dir, [](std::string_view name) {
    return name.starts_with("conv1.") || name.starts_with("encoder.");
  });
  return std::make_unique<Wan22Encoder>(ctx, ckpt, act);
}

}  // namespace avdit::models::vae::wan22
