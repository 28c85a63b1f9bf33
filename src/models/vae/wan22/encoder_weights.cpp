// Checkpoint -> EncoderWeights: the stage layout read from which tensors exist and their shapes,
// every tensor checked before the network runs.
#include <fmt/format.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/wan22/encoder.h"
#include "models/vae/wan22/latent_stats.h"
#include "ops/context.h"

namespace avdit::models::vae::wan22 {
namespace {

DownStageWeights load_stage(const Checkpoint& ckpt, int64_t i, int64_t in) {
  DownStageWeights s;
  s.in = in;
  const std::string p = fmt::format("encoder.downsamples.{}.downsamples.", i);
  int64_t j = 0, c = in;
  s.blocks = load_residual_run(ckpt, p, in, &j, &c);
  s.out = c;
  const std::string r = p + std::to_string(j);
  if (ckpt.contains(r + ".resample.1.weight")) {
    s.down = true;
    s.resample_conv = load_conv(ckpt, r + ".resample.1", c, c);
    s.temporal = ckpt.contains(r + ".time_conv.weight");
    if (s.temporal) s.time_conv = load_conv(ckpt, r + ".time_conv", c, c);
  }
  return s;
}

}  // namespace

EncoderWeights load_encoder_weights(ops::Context& ctx, const Checkpoint& ckpt, DType act) {
  EncoderWeights w;
  AVDIT_REQUIRE(ckpt.contains("encoder.conv1.weight") && ckpt.contains("conv1.weight"),
                "{}: not a Wan2.2 VAE encoder checkpoint (encoder.conv1.weight / conv1.weight "
                "missing)",
                ckpt.source().string());
  const int64_t c0 = ckpt.info("encoder.conv1.weight").shape.at(0), z2 = 2 * kLatentChannels;
  w.conv1 = load_conv(ckpt, "encoder.conv1", c0, 12);
  int64_t c = c0;
  for (int64_t i = 0;
       residual_block_out(ckpt, fmt::format("encoder.downsamples.{}.downsamples.0", i)); ++i) {
    w.downsamples.push_back(load_stage(ckpt, i, c));
    c = w.downsamples.back().out;
  }
  AVDIT_REQUIRE(!w.downsamples.empty(), "{}: no encoder.downsamples.0 stage",
                ckpt.source().string());
  w.middle0 = load_residual_block(ckpt, "encoder.middle.0", c, c);
  w.middle1 = load_attention_block(ckpt, "encoder.middle.1", c);
  w.middle2 = load_residual_block(ckpt, "encoder.middle.2", c, c);
  w.head_gamma = load_gamma(ckpt, "encoder.head.0.gamma", c);
  w.head = load_conv(ckpt, "encoder.head.2", z2, c);
  w.quant = load_conv(ckpt, "conv1", z2, z2);
  w.head_gamma = ctx.upload(w.head_gamma);
  for (Conv* cv : {&w.conv1, &w.head, &w.quant}) place(ctx, *cv, act);
  for (DownStageWeights& s : w.downsamples) {
    for (ResidualBlockWeights& b : s.blocks) place(ctx, b, act);
    place(ctx, s.resample_conv, act);
    place(ctx, s.time_conv, act);
  }
  place(ctx, w.middle0, act);
  place(ctx, w.middle1, act);
  place(ctx, w.middle2, act);
  return w;
}

}  // namespace avdit::models::vae::wan22
