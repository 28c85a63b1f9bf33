// Checkpoint -> DecoderWeights: the stage layout is read from which tensors exist and their
// shapes (the reference builds it from WanVAE_kwargs; the release ships no config), every tensor
// checked before the network runs.
#include <fmt/format.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/wan22/decoder.h"
#include "models/vae/wan22/latent_stats.h"
#include "ops/context.h"

namespace avdit::models::vae::wan22 {
namespace {

UpStageWeights load_stage(const Checkpoint& ckpt, int64_t i, int64_t in) {
  UpStageWeights s;
  s.in = in;
  const std::string p = fmt::format("decoder.upsamples.{}.upsamples.", i);
  int64_t j = 0, c = in;
  s.blocks = load_residual_run(ckpt, p, in, &j, &c);
  s.out = c;
  const std::string r = p + std::to_string(j);
  if (ckpt.contains(r + ".resample.1.weight")) {
    s.resample = ckpt.contains(r + ".time_conv.weight") ? Resample::Up3d : Resample::Up2d;
    s.resample_conv = load_conv(ckpt, r + ".resample.1", c, c);
    if (s.resample == Resample::Up3d) s.time_conv = load_conv(ckpt, r + ".time_conv", 2 * c, c);
    // The DupUp3D shortcut spreads `in` channels over out x f_t x 2 x 2 values.
    const int64_t spread = c * (s.resample == Resample::Up3d ? 2 : 1) * 4;
    AVDIT_REQUIRE(spread % in == 0,
                  "{}: decoder.upsamples.{} goes from {} to {} channels, which its DupUp3D "
                  "shortcut cannot spread ({} values per voxel)",
                  ckpt.source().string(), i, in, c, spread);
  }
  return s;
}

// WanVAE_kwargs in config.json (the golden's), when present, must describe this checkpoint.
void check_config(const Checkpoint& ckpt, const DecoderWeights& w) {
  const nlohmann::json* cfg = ckpt.config();
  if (!cfg || !cfg->contains("WanVAE_kwargs")) return;
  const nlohmann::json& k = cfg->at("WanVAE_kwargs");
  const auto field = [&](const char* name) -> const nlohmann::json& {
    AVDIT_REQUIRE(k.contains(name), "{}/config.json: WanVAE_kwargs lacks '{}'", ckpt.dir().string(),
                  name);
    return k.at(name);
  };
  const int64_t z = field("z_dim").get<int64_t>(), dec = field("dec_dim").get<int64_t>();
  const auto mult = field("dim_mult").get<std::vector<int64_t>>();
  AVDIT_REQUIRE(z == kLatentChannels && !mult.empty() && dec * mult.back() == w.conv1.out() &&
                    mult.size() == w.upsamples.size(),
                "{}/config.json: WanVAE_kwargs (z_dim {}, dec_dim {}, {} stages) disagree with the "
                "checkpoint (decoder.conv1 gives {} channels, {} upsample stages)",
                ckpt.dir().string(), z, dec, mult.size(), w.conv1.out(), w.upsamples.size());
}

}  // namespace

DecoderWeights load_decoder_weights(ops::Context& ctx, const Checkpoint& ckpt, DType act) {
  DecoderWeights w;
  const int64_t z = kLatentChannels;
  AVDIT_REQUIRE(ckpt.contains("conv2.weight") && ckpt.contains("decoder.conv1.weight"),
                "{}: not a Wan2.2 VAE decoder checkpoint (conv2.weight / decoder.conv1.weight "
                "missing)",
                ckpt.source().string());
  w.conv2 = load_conv(ckpt, "conv2", z, z);
  const int64_t c0 = ckpt.info("decoder.conv1.weight").shape.at(0);
  w.conv1 = load_conv(ckpt, "decoder.conv1", c0, z);
  w.middle0 = load_residual_block(ckpt, "decoder.middle.0", c0, c0);
  w.middle1 = load_attention_block(ckpt, "decoder.middle.1", c0);
  w.middle2 = load_residual_block(ckpt, "decoder.middle.2", c0, c0);
  int64_t c = c0;
  for (int64_t i = 0; residual_block_out(ckpt, fmt::format("decoder.upsamples.{}.upsamples.0", i));
       ++i) {
    w.upsamples.push_back(load_stage(ckpt, i, c));
    c = w.upsamples.back().out;
  }
  AVDIT_REQUIRE(!w.upsamples.empty(), "{}: no decoder.upsamples.0 stage (a Wan2.2 VAE decoder?)",
                ckpt.source().string());
  w.head_gamma = load_gamma(ckpt, "decoder.head.0.gamma", c);
  w.head = load_conv(ckpt, "decoder.head.2", 12, c);
  check_config(ckpt, w);
  for (Conv* cv : {&w.conv2, &w.conv1, &w.head}) place(ctx, *cv, act);
  place(ctx, w.middle0, act);
  place(ctx, w.middle1, act);
  place(ctx, w.middle2, act);
  for (UpStageWeights& s : w.upsamples) {
    for (ResidualBlockWeights& b : s.blocks) place(ctx, b, act);
    place(ctx, s.resample_conv, act);
    place(ctx, s.time_conv, act);
  }
  w.head_gamma = ctx.upload(w.head_gamma);
  return w;
}

}  // namespace avdit::models::vae::wan22
