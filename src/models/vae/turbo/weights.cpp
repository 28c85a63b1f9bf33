// Checkpoint -> TurboWeights under the reference's state_dict names, the layout walked from the
// config as TurboVAEDDecoder3d.__init__ builds it (lists reversed), every tensor checked first.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/turbo/decoder.h"
#include "ops/context.h"

namespace avdit::models::vae::turbo {
namespace {

using wan22::load_conv;

template <class T>
std::vector<T> reversed(std::vector<T> v) {
  std::reverse(v.begin(), v.end());
  return v;
}

ResnetWeights load_resnet(const Checkpoint& ckpt, const std::string& p, int64_t in, int64_t out,
                          bool relu_first) {
  ResnetWeights r;
  r.conv1 = load_conv(ckpt, p + ".conv1.conv", out, in);
  r.conv2 = load_conv(ckpt, p + ".conv2.conv", out, out);
  if (in != out) r.conv_shortcut = load_conv(ckpt, p + ".conv_shortcut.conv", out, in);
  r.relu_first = relu_first;
  return r;
}

void place(ops::Context& ctx, ResnetWeights& r, DType act) {
  wan22::place(ctx, r.conv1, act);
  wan22::place(ctx, r.conv2, act);
  wan22::place(ctx, r.conv_shortcut, act);
}

}  // namespace

TurboWeights load_turbo_weights(ops::Context& ctx, const Checkpoint& ckpt, const TurboVaedConfig& c,
                                DType act) {
  const auto channels = reversed(c.decoder_block_out_channels);
  const auto layers = reversed(c.decoder_layers_per_block);
  const auto scaling = reversed(c.decoder_spatio_temporal_scaling);
  const auto spatio_only = reversed(c.decoder_spatio_only);
  TurboWeights w;
  int64_t ch = channels[0];
  w.conv_in = load_conv(ckpt, "decoder.conv_in.conv", ch, c.latent_channels);
  for (int64_t k = 0; k < layers[0]; ++k)
    w.mid_block.push_back(
        load_resnet(ckpt, fmt::format("decoder.mid_block.resnets.{}", k), ch, ch, false));
  int64_t time_stages = 0;
  for (size_t i = 0; i < channels.size(); ++i) {
    const std::string p = fmt::format("decoder.up_blocks.{}", i);
    UpBlockWeights b;
    const int64_t in = ch, out = channels[i];
    if (in != out) {
      b.has_conv_in = true;
      b.conv_in = load_resnet(ckpt, p + ".conv_in", in, out, false);
    }
    if (scaling[i]) {
      b.upsampler = spatio_only[i] ? Upsampler::Up2d : Upsampler::Up3d;
      b.resample_conv = load_conv(ckpt, p + ".upsamplers.0.resample.1", out, out);
      if (b.upsampler == Upsampler::Up3d) {
        b.time_conv = load_conv(ckpt, p + ".upsamplers.0.time_conv.conv", 2 * out, out);
        ++time_stages;
      }
    }
    for (int64_t k = 0; k < layers[i + 1]; ++k)
      b.resnets.push_back(
          load_resnet(ckpt, fmt::format("{}.resnets.{}", p, k), out, out, scaling[i]));
    w.up_blocks.push_back(std::move(b));
    ch = out;
  }
  AVDIT_REQUIRE(int64_t{1} << time_stages == c.temporal_compression_ratio,
                "TurboVAED config: {} time-upsampling blocks give x{} in time, but "
                "temporal_compression_ratio is {}",
                time_stages, int64_t{1} << time_stages, c.temporal_compression_ratio);
  w.conv_out =
      load_conv(ckpt, "decoder.conv_out.conv", c.out_channels * c.patch_size * c.patch_size, ch);
  wan22::place(ctx, w.conv_in, act);
  wan22::place(ctx, w.conv_out, act);
  for (ResnetWeights& r : w.mid_block) place(ctx, r, act);
  for (UpBlockWeights& b : w.up_blocks) {
    if (b.has_conv_in) place(ctx, b.conv_in, act);
    wan22::place(ctx, b.time_conv, act);
    wan22::place(ctx, b.resample_conv, act);
    for (ResnetWeights& r : b.resnets) place(ctx, r, act);
  }
  return w;
}

}  // namespace avdit::models::vae::turbo
