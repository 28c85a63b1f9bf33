// The one place that maps the Oobleck decoder's official names to members (see weights.h).
#include "models/vae/oobleck/weights.h"

#include <fmt/format.h>

#include "io/safetensors.h"
#include "models/vae/audio_weights.h"

namespace avdit::models::vae::oobleck {
namespace {

SnakeWeights snake(const AudioWeights& r, const std::string& p, int64_t C) {
  return {r.get(p + ".alpha", {C}), r.get(p + ".beta", {C})};
}

ResidualUnitWeights residual_unit(const AudioWeights& r, const std::string& p, int64_t C,
                                  int64_t dilation) {
  ResidualUnitWeights u;
  u.dilation = dilation;
  u.act0 = snake(r, p + ".layers.0", C);
  u.conv1_w = r.weight_norm(p + ".layers.1.weight_g", p + ".layers.1.weight_v", {C, C, 7});
  u.conv1_b = r.get(p + ".layers.1.bias", {C});
  u.act2 = snake(r, p + ".layers.2", C);
  u.conv3_w = r.weight_norm(p + ".layers.3.weight_g", p + ".layers.3.weight_v", {C, C, 1});
  u.conv3_b = r.get(p + ".layers.3.bias", {C});
  return u;
}

}  // namespace

OobleckWeights load_weights(ops::Context& ctx, const Checkpoint& ckpt, const OobleckConfig& c) {
  // The release's checkpoint holds the whole model; its autoencoder sits under this prefix.
  const std::string prefix =
      ckpt.contains("pretransform.model.decoder.layers.0.weight_v") ? "pretransform.model." : "";
  const AudioWeights r(ctx, ckpt, prefix, "Oobleck decoder");
  // The reference prepends 1 to c_mults: widths 16C, 8C, 4C, 2C, C, C for the release.
  std::vector<int64_t> mult = {1};
  mult.insert(mult.end(), c.c_mults.begin(), c.c_mults.end());
  const int64_t depth = static_cast<int64_t>(mult.size());
  OobleckWeights w;
  const int64_t top = mult.back() * c.channels;
  w.conv_in_w = r.weight_norm("decoder.layers.0.weight_g", "decoder.layers.0.weight_v",
                              {top, c.latent_dim, 7});
  w.conv_in_b = r.get("decoder.layers.0.bias", {top});
  int64_t layer = 1;
  for (int64_t i = depth - 1; i >= 1; --i, ++layer) {
    const int64_t in = mult[i] * c.channels, out = mult[i - 1] * c.channels;
    const std::string p = fmt::format("decoder.layers.{}", layer);
    DecoderBlockWeights b;
    b.stride = c.strides[i - 1];
    b.act = snake(r, p + ".layers.0", in);
    b.up_w =
        r.weight_norm(p + ".layers.1.weight_g", p + ".layers.1.weight_v", {in, out, 2 * b.stride});
    b.up_b = r.get(p + ".layers.1.bias", {out});
    const int64_t dilations[3] = {1, 3, 9};
    for (int j = 0; j < 3; ++j)
      b.res[j] = residual_unit(r, fmt::format("{}.layers.{}", p, 2 + j), out, dilations[j]);
    w.blocks.push_back(std::move(b));
  }
  w.act_out = snake(r, fmt::format("decoder.layers.{}", layer), c.channels);
  const std::string conv_out = fmt::format("decoder.layers.{}", layer + 1);
  w.conv_out_w = r.weight_norm(conv_out + ".weight_g", conv_out + ".weight_v",
                               {c.out_channels, mult[0] * c.channels, 7});
  return w;
}

}  // namespace avdit::models::vae::oobleck
