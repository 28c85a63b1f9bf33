// The H3 audio decoder on the op set, in the reference's order (dac_audio_vae.py decode,
// dac_bigvgan.py BigVGAN.forward and AMPBlock1.forward).
#include "models/vae/bigvgan/decoder.h"

#include <fmt/format.h>

#include "core/error.h"
#include "io/finite.h"
#include "io/safetensors.h"
#include "models/vae/bigvgan/weights.h"
#include "ops/activation.h"
#include "ops/context.h"
#include "ops/conv1d.h"
#include "ops/conv1d_affine.h"
#include "ops/conv1d_alias_free.h"
#include "ops/conv1d_transpose.h"

namespace avdit::models::vae::bigvgan {
namespace {

Tensor act(ops::Context& ctx, const Tensor& x, const ActivationWeights& a) {
  return ops::conv1d_alias_free_snake(ctx, x, a.up, a.down, a.alpha, a.beta, kActivationRatio);
}

// AMPBlock1: for each n, x = x + convs2[n](act(convs1[n](act(x)))), convs1 dilated.
Tensor amp_block(ops::Context& ctx, Tensor x, const AmpBlockWeights& b) {
  const int64_t k = b.kernel;
  for (int n = 0; n < 3; ++n) {
    const int64_t d = kResblockDilations[n];
    Tensor t = act(ctx, x, b.acts[2 * n]);
    t = ops::conv1d(ctx, t, b.convs1_w[n], &b.convs1_b[n],
                    {.padding = d * (k - 1) / 2, .dilation = d});
    t = act(ctx, t, b.acts[2 * n + 1]);
    t = ops::conv1d(ctx, t, b.convs2_w[n], &b.convs2_b[n], {.padding = (k - 1) / 2});
    ops::add_(ctx, t, x);
    x = t;
  }
  return x;
}

}  // namespace

H3AudioDecoder::H3AudioDecoder(ops::Context& ctx, const std::filesystem::path& dir)
    : ctx_(ctx), config_(read_h3_audio_config(dir)) {
  const Checkpoint ckpt = Checkpoint::open(dir, [](std::string_view name) {
    return name.starts_with("dec_in_proj.") || name.starts_with("decoder.");
  });
  w_ = load_weights(ctx, ckpt, config_, &decoder_dim_);
  const int64_t C = config_.latent_channels;
  mean_ = ctx.upload(Tensor::from_floats(config_.latents_mean, {C}));
  std_ = ctx.upload(Tensor::from_floats(config_.latents_std, {C}));
  // BigVGAN averages its three residual blocks: xs / num_kernels.
  third_ = ctx.upload(Tensor::from_floats({1.0f / 3.0f}, {1}));
  one_ = ctx.upload(Tensor::from_floats({1.0f}, {1}));
}

std::string H3AudioDecoder::describe() const {
  return fmt::format("MiniMax-H3 audio decoder (BigVGAN), {} channels, {} Hz", decoder_dim_,
                     config_.sample_rate);
}

Tensor H3AudioDecoder::decode(const Tensor& latents) const {
  const int64_t C = config_.latent_channels;
  AVDIT_REQUIRE(
      latents.ndim() == 3 && latents.size(0) >= 1 && latents.size(1) == C && latents.size(2) >= 1,
      "latents {}: expected [channels, {}, T] (the MiniMax-H3 audio latent, one row per "
      "output channel, T >= 1)",
      latents.shape_str(), C);
  require_finite(latents, "latents");
  const Tensor z = ctx_.upload(latents.to_f32());
  Tensor x = ops::conv1d_affine(ctx_, z, std_, &mean_);
  ops::observe(ctx_, Point{"latent_denorm"}, x);
  x = ops::conv1d(ctx_, x, w_.in_proj_w, &w_.in_proj_b);
  ops::observe(ctx_, Point{"after_dec_in_proj"}, x);
  x = ops::conv1d(ctx_, x, w_.conv_pre_w, &w_.conv_pre_b, {.padding = 3});
  ops::observe(ctx_, Point{"after_conv_pre"}, x);
  for (size_t i = 0; i < w_.stages.size(); ++i) {
    const StageWeights& s = w_.stages[i];
    const int64_t k = s.up_w.size(2);
    x = ops::conv1d_transpose(ctx_, x, s.up_w, &s.up_b,
                              {.stride = s.rate, .padding = (k - s.rate) / 2});
    ops::observe(ctx_, Point{"stage{}_after_up", static_cast<int64_t>(i)}, x);
    Tensor xs = amp_block(ctx_, x, s.blocks[0]);
    ops::add_(ctx_, xs, amp_block(ctx_, x, s.blocks[1]));
    ops::add_(ctx_, xs, amp_block(ctx_, x, s.blocks[2]));
    x = ops::conv1d_affine(ctx_, xs, third_);
    ops::observe(ctx_, Point{"stage{}_out", static_cast<int64_t>(i)}, x);
  }
  x = act(ctx_, x, w_.act_post);
  x = ops::conv1d(ctx_, x, w_.conv_post_w, nullptr, {.padding = 3});
  ops::observe(ctx_, Point{"after_conv_post"}, x);
  x = ops::conv1d_affine(ctx_, x, one_, nullptr, -1.0f, 1.0f);  // use_tanh_at_final False
  ops::observe(ctx_, Point{"waveform"}, x);
  // [rows, 1, L] -> [rows, L]: row i is output channel i (the adapter's permute(1, 0, 2)).
  return ctx_.download(x).reshape({x.size(0), x.size(2)});
}

}  // namespace avdit::models::vae::bigvgan

namespace avdit::models::vae {
std::unique_ptr<Decoder> open_h3_audio(ops::Context& ctx, const std::filesystem::path& dir) {
  return std::make_unique<bigvgan::H3AudioDecoder>(ctx, dir);
}
}  // namespace avdit::models::vae
