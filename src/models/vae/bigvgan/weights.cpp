// The one place that maps the H3 audio decoder's official names to members (see weights.h):
// dec_in_proj.*, decoder.conv_pre, decoder.ups.{i}.0, decoder.resblocks.{3 i + j},
// decoder.activation_post, decoder.conv_post; weight norm as torch's parametrizations store it.
#include "models/vae/bigvgan/weights.h"

#include <fmt/format.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/audio_weights.h"

namespace avdit::models::vae::bigvgan {
namespace {

Tensor wn(const AudioWeights& r, const std::string& p, const Shape& shape) {
  return r.weight_norm(p + ".parametrizations.weight.original0",
                       p + ".parametrizations.weight.original1", shape);
}

ActivationWeights activation(const AudioWeights& r, const std::string& p, int64_t C) {
  ActivationWeights a;
  a.alpha = r.get(p + ".act.alpha", {C});
  a.beta = r.get(p + ".act.beta", {C});
  // The filters' length is the reference's kernel_size (12 in the release); any length works.
  a.up = r.get(p + ".upsample.filter", r.shape_of(p + ".upsample.filter"));
  a.down = r.get(p + ".downsample.lowpass.filter", r.shape_of(p + ".downsample.lowpass.filter"));
  AVDIT_REQUIRE(a.up.numel() >= kActivationRatio && a.down.numel() >= 1,
                "H3 audio decoder: {}: filters of {} and {} taps", p, a.up.numel(), a.down.numel());
  return a;
}

AmpBlockWeights amp_block(const AudioWeights& r, const std::string& p, int64_t C, int64_t k) {
  AmpBlockWeights b;
  b.kernel = k;
  for (int n = 0; n < 3; ++n) {
    const std::string c1 = fmt::format("{}.convs1.{}", p, n),
                      c2 = fmt::format("{}.convs2.{}", p, n);
    b.convs1_w[n] = wn(r, c1, {C, C, k});
    b.convs1_b[n] = r.get(c1 + ".bias", {C});
    b.convs2_w[n] = wn(r, c2, {C, C, k});
    b.convs2_b[n] = r.get(c2 + ".bias", {C});
  }
  for (int n = 0; n < 6; ++n) b.acts[n] = activation(r, fmt::format("{}.activations.{}", p, n), C);
  return b;
}

}  // namespace

H3AudioWeights load_weights(ops::Context& ctx, const Checkpoint& ckpt, const H3AudioConfig& c,
                            int64_t* decoder_dim) {
  const AudioWeights r(ctx, ckpt, "", "MiniMax-H3 audio decoder");
  const Shape in_proj = r.shape_of("dec_in_proj.weight");
  AVDIT_REQUIRE(in_proj.size() == 3 && in_proj[1] == c.latent_channels && in_proj[2] == 1,
                "MiniMax-H3 audio decoder checkpoint {}: dec_in_proj.weight is [{}], expected "
                "[latent_dim, {}, 1]",
                ckpt.source().string(), fmt::join(in_proj, ", "), c.latent_channels);
  const int64_t latent_dim = in_proj[0];
  const Shape pre = r.shape_of("decoder.conv_pre.parametrizations.weight.original1");
  const int64_t D = pre.empty() ? 0 : pre[0];
  // Seven halvings must leave at least one channel (the reference's own limit).
  AVDIT_REQUIRE(D >= 128 && D % 128 == 0,
                "MiniMax-H3 audio decoder checkpoint {}: conv_pre width {} is not a multiple of "
                "128 (seven upsampling stages halve it)",
                ckpt.source().string(), D);
  *decoder_dim = D;
  H3AudioWeights w;
  w.in_proj_w = r.get("dec_in_proj.weight", {latent_dim, c.latent_channels, 1});
  w.in_proj_b = r.get("dec_in_proj.bias", {latent_dim});
  w.conv_pre_w = wn(r, "decoder.conv_pre", {D, latent_dim, 7});
  w.conv_pre_b = r.get("decoder.conv_pre.bias", {D});
  int64_t ch = D;
  for (size_t i = 0; i < kUpsampleRates.size(); ++i) {
    StageWeights s;
    s.rate = kUpsampleRates[i];
    const std::string up = fmt::format("decoder.ups.{}.0", i);
    s.up_w = wn(r, up, {ch, ch / 2, kUpsampleKernels[i]});
    s.up_b = r.get(up + ".bias", {ch / 2});
    ch /= 2;
    for (size_t j = 0; j < kResblockKernels.size(); ++j)
      s.blocks[j] =
          amp_block(r, fmt::format("decoder.resblocks.{}", 3 * i + j), ch, kResblockKernels[j]);
    w.stages.push_back(std::move(s));
  }
  w.act_post = activation(r, "decoder.activation_post", ch);
  w.conv_post_w = wn(r, "decoder.conv_post", {1, ch, 7});
  return w;
}

}  // namespace avdit::models::vae::bigvgan
