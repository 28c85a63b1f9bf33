// The TurboVAED decode, step by step as turbo_vaed.py computes it (the golden README's "Decode
// procedure"): de-normalise, pad to the window plan, decode each window whole, trim the overlap.
// Named points carry the golden's names.
#include "models/vae/turbo/decoder.h"

#include <fmt/format.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/wan22/latent_stats.h"
#include "models/vae/wan22/patch.h"
#include "ops/activation.h"
#include "ops/context.h"
#include "ops/conv3d.h"
#include "ops/norm.h"
#include "ops/relu.h"
#include "ops/rows.h"
#include "ops/space_shuffle3d.h"

namespace avdit::models::vae::turbo {
namespace {

// The RMSNorms of the ResNet blocks and the output; norm3 (the shortcut's) uses resnet_norm_eps.
constexpr float kNormEps = 1e-8f;

// TurboVAEDCausalConv3d (not causal): (kt - 1) / 2 copies of the edge frames on each side in time,
// zeros of kh / 2, kw / 2 in space. Also the per-frame Conv2d of the upsamplers (kt = 1).
Tensor replicate_conv(ops::Context& ctx, const Conv& c, const Tensor& x) {
  ops::Conv3dGeometry g;
  g.pad_front = g.pad_back = (c.kt() - 1) / 2;
  g.time_pad = ops::TimePad::Replicate;
  g.pad_top = g.pad_bottom = c.w.size(2) / 2;
  g.pad_left = g.pad_right = c.w.size(3) / 2;
  return ops::conv3d(ctx, x, c.w, &c.b, g, c.w.dtype());
}

// Weight-free RMSNorm over the channels of channel-last video (the variance in float32, the result
// rounded once to x's dtype, as the reference's `.to(input_dtype)`).
Tensor norm(ops::Context& ctx, const Tensor& x, float eps) {
  const int64_t C = x.size(-1);
  return ops::rms_norm(ctx, x.reshape({x.numel() / C, C}), ops::RmsNormWeight{}, eps)
      .reshape(x.shape());
}

Tensor resnet(ops::Context& ctx, const ResnetWeights& r, const Tensor& x, float shortcut_eps) {
  Tensor h = norm(ctx, x, kNormEps);
  h = r.relu_first ? ops::relu(ctx, h) : ops::silu(ctx, h);
  h = replicate_conv(ctx, r.conv1, h);
  h = replicate_conv(ctx, r.conv2, ops::silu(ctx, norm(ctx, h, kNormEps)));
  if (r.conv_shortcut.w.defined())
    ops::add_(ctx, h, replicate_conv(ctx, r.conv_shortcut, norm(ctx, x, shortcut_eps)));
  else
    ops::add_(ctx, h, x);
  return h;
}

// WanResample: time_conv doubles the frames (frame 2t + n = channels [nC, (n+1)C) of time t) and
// the first window drops the first of them; then nearest x2 and a Conv2d on every frame.
Tensor upsample(ops::Context& ctx, const UpBlockWeights& b, const Tensor& x, bool first_chunk) {
  Tensor y = x;
  if (b.upsampler == Upsampler::Up3d) {
    const int64_t c = x.size(3);
    y = ops::channels_to_space3d(ctx, replicate_conv(ctx, b.time_conv, x),
                                 {2, 1, c, 1, c, 0, 0, 1});
    if (first_chunk) y = y.slice_rows(1, y.size(0));
  }
  return replicate_conv(ctx, b.resample_conv, ops::upsample_nearest2x(ctx, y));
}

void point(ops::Context& ctx, const std::string& name, const Tensor& t) {
  ops::observe(ctx, {name.c_str()}, t);
}

}  // namespace

TurboVaed::TurboVaed(ops::Context& ctx, const Checkpoint& ckpt, const TurboVaedConfig& config,
                     DType act)
    : ctx_(ctx),
      config_(config),
      act_(wan22::require_act(act, "TurboVAED")),
      w_(load_turbo_weights(ctx, ckpt, config, act)) {}

std::string TurboVaed::describe() const {
  return fmt::format("MAGI-2 TurboVAED, Wan2.2 z48 latents (width {}, windows {}+{}, {}, {})",
                     w_.conv_in.out(), config_.first_chunk_size, config_.step_size, ctx_.name(),
                     dtype_name(act_));
}

Tensor TurboVaed::decode_window(const Tensor& z, bool first_chunk, int64_t i) const {
  ops::Context& ctx = ctx_;
  const float eps3 = static_cast<float>(config_.resnet_norm_eps);
  const std::string p = fmt::format("window{}_", i);
  point(ctx, p + "input", z);
  Tensor x = replicate_conv(ctx, w_.conv_in, z);
  point(ctx, p + "after_conv_in", x);
  for (const ResnetWeights& r : w_.mid_block) x = resnet(ctx, r, x, eps3);
  point(ctx, p + "after_mid_block", x);
  for (size_t j = 0; j < w_.up_blocks.size(); ++j) {
    const UpBlockWeights& b = w_.up_blocks[j];
    if (b.has_conv_in) x = resnet(ctx, b.conv_in, x, eps3);
    if (b.upsampler != Upsampler::None) x = upsample(ctx, b, x, first_chunk);
    for (const ResnetWeights& r : b.resnets) x = resnet(ctx, r, x, eps3);
    point(ctx, fmt::format("{}after_up_block{}", p, j), x);
  }
  x = replicate_conv(ctx, w_.conv_out, ops::silu(ctx, norm(ctx, x, kNormEps)));
  point(ctx, p + "after_conv_out", x);
  const std::string out_name = p + "output";
  ops::observe_lazy(ctx, {out_name.c_str()},
                    [&] { return ctx.upload(wan22::unpatchify(ctx.download(x).to(DType::F32))); });
  return x;
}

Tensor TurboVaed::decode(const Tensor& latents) const {
  return wan22::frames_to_video(ctx_.download(decode_frames(latents)));
}

Tensor TurboVaed::decode_frames(const Tensor& latents) const {
  ops::Context& ctx = ctx_;
  // BF16, as MAGI-2's decode_video: z rounded to bf16, de-normalised in float32 (the module's
  // float32 mean and std), the result rounded back to bf16 (on its way to the context, below).
  const Tensor z = wan22::denormalize_latents(act_ == DType::F32 ? latents : latents.to(act_),
                                              "TurboVAED: latents");
  const int64_t T = z.size(0), f = config_.first_chunk_size, s = config_.step_size,
                tc = config_.temporal_compression_ratio;
  // The window plan: pad with copies of the last latent frame to f + k*s frames.
  const int64_t pad = T < f ? f - T : (s - (T - f) % s) % s, n = T + pad;
  std::vector<Tensor> frames = {z};
  for (int64_t k = 0; k < pad; ++k) frames.push_back(z.slice_rows(T - 1, T));
  const Tensor zp = ctx.upload(wan22::concat_frames(frames, n).to(act_));
  // Each window's kept frames as channel-last RGB (a quarter of the window's activations).
  std::vector<Tensor> kept;
  auto keep = [&](const Tensor& out, int64_t drop_front, int64_t drop_back) {
    kept.push_back(
        wan22::patches_to_frames(ctx, out.slice_rows(drop_front, out.size(0) - drop_back)));
  };
  if (n == f) {
    keep(decode_window(zp, true, 0), 0, 0);
  } else {
    keep(decode_window(zp.slice_rows(0, f + 1), true, 0), 0, tc);
    int64_t window = 1;
    for (int64_t i = f; i < n; i += s, ++window) {
      const bool last = i + s == n;
      const Tensor out =
          decode_window(zp.slice_rows(i - 1, last ? i + s : i + s + 1), false, window);
      keep(out, tc, last ? 0 : tc);
    }
  }
  const Tensor all = ops::concat_rows(ctx, kept);
  return all.slice_rows(0, all.size(0) - tc * pad);
}

}  // namespace avdit::models::vae::turbo

namespace avdit::models::vae {

std::unique_ptr<Decoder> open_turbo_vaed(ops::Context& ctx, const std::filesystem::path& dir,
                                         DType act) {
  namespace fs = std::filesystem;
  std::error_code ec;
  AVDIT_REQUIRE(fs::is_directory(dir, ec),
                "TurboVAED {}: not a folder (the decoder's folder with its architecture JSON and "
                "model.safetensors is needed)",
                dir.string());
  fs::path json = dir / "config.json";
  if (!fs::is_regular_file(json, ec)) json = dir / "TurboV3-Wan22-TinyShallow_7_7.json";
  AVDIT_REQUIRE(fs::is_regular_file(json, ec),
                "TurboVAED {}: no config.json (nor the release's "
                "TurboV3-Wan22-TinyShallow_7_7.json) describing the architecture",
                dir.string());
  const auto config = turbo::TurboVaedConfig::from_json(read_json(json));
  const Checkpoint ckpt =
      Checkpoint::open(dir, [](std::string_view name) { return name.starts_with("decoder."); });
  return std::make_unique<turbo::TurboVaed>(ctx, ckpt, config, act);
}

}  // namespace avdit::models::vae
