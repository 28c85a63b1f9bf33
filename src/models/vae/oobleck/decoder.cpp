// The Oobleck decoder on the op set, in the reference's order (sa_audio_vae.py: OobleckDecoder,
// DecoderBlock, ResidualUnit), and MAGI-2's decode_audio around it.
#include "models/vae/oobleck/decoder.h"

#include <fmt/format.h>

#include "core/error.h"
#include "io/finite.h"
#include "io/safetensors.h"
#include "models/vae/oobleck/weights.h"
#include "ops/activation.h"
#include "ops/context.h"
#include "ops/conv1d.h"
#include "ops/conv1d_transpose.h"
#include "ops/resample_fft.h"
#include "ops/snake_beta.h"

namespace avdit::models::vae::oobleck {
namespace {

Tensor snake(ops::Context& ctx, const Tensor& x, const SnakeWeights& w) {
  return ops::snake_beta(ctx, x, w.alpha, w.beta);
}

Tensor residual_unit(ops::Context& ctx, const Tensor& x, const ResidualUnitWeights& u) {
  Tensor y = snake(ctx, x, u.act0);
  y = ops::conv1d(ctx, y, u.conv1_w, &u.conv1_b,
                  {.padding = 3 * u.dilation, .dilation = u.dilation});
  y = snake(ctx, y, u.act2);
  y = ops::conv1d(ctx, y, u.conv3_w, &u.conv3_b);
  ops::add_(ctx, y, x);
  return y;
}

}  // namespace

OobleckDecoder::OobleckDecoder(ops::Context& ctx, const std::filesystem::path& dir)
    : ctx_(ctx), config_(read_oobleck_config(dir)) {
  const Checkpoint ckpt = Checkpoint::open(dir, [](std::string_view name) {
    return name.starts_with("decoder.") || name.starts_with("pretransform.model.decoder.");
  });
  w_ = load_weights(ctx, ckpt, config_);
}

std::string OobleckDecoder::describe() const {
  return fmt::format("Stable Audio Open Oobleck decoder, {} channels, x{} to {} Hz",
                     config_.channels, config_.hop(), config_.sample_rate);
}

int64_t OobleckDecoder::stretched_length(int64_t n) const {
  // n * sample_rate / (25 * hop), truncated as int() does: exact in integers for 25 frames/s.
  const int64_t per_second = static_cast<int64_t>(kAudioLatentFps) * config_.hop();
  return n * config_.sample_rate / per_second;
}

Tensor OobleckDecoder::waveform(const Tensor& z) const {
  Tensor x = ops::conv1d(ctx_, z, w_.conv_in_w, &w_.conv_in_b, {.padding = 3});
  ops::observe(ctx_, Point{"after_conv_in"}, x);
  for (size_t i = 0; i < w_.blocks.size(); ++i) {
    const DecoderBlockWeights& b = w_.blocks[i];
    x = snake(ctx_, x, b.act);
    // kernel 2s, padding ceil(s / 2): the length is multiplied by exactly s (s even).
    x = ops::conv1d_transpose(ctx_, x, b.up_w, &b.up_b,
                              {.stride = b.stride, .padding = (b.stride + 1) / 2});
    for (const ResidualUnitWeights& u : b.res) x = residual_unit(ctx_, x, u);
    ops::observe(ctx_, Point{"after_block{}", static_cast<int64_t>(i) + 1}, x);
  }
  x = snake(ctx_, x, w_.act_out);
  x = ops::conv1d(ctx_, x, w_.conv_out_w, nullptr, {.padding = 3});
  ops::observe(ctx_, Point{"waveform"}, x);
  return x;
}

Tensor OobleckDecoder::decode(const Tensor& latents) const {
  const int64_t D = config_.latent_dim;
  AVDIT_REQUIRE(latents.ndim() == 2 && latents.size(0) >= 1 && latents.size(1) == D,
                "latents {}: expected [T, {}] (the MAGI-2 audio latent, time-major, T >= 1)",
                latents.shape_str(), D);
  require_finite(latents, "latents");
  const Tensor l = latents.to_f32();
  const int64_t T = l.size(0);
  // latent_tc.T, then * SA_RESCALE_STD + SA_RESCALE_MEAN -> [1, D, T].
  Tensor z = Tensor::empty({1, D, T}, DType::F32);
  const float* src = l.f32();
  float* dst = z.f32();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < D; ++c) dst[c * T + t] = src[t * D + c] * kRescaleStd + kRescaleMean;
  const Tensor wav = waveform(ctx_.upload(z));
  const int64_t C = wav.size(1), N = wav.size(2);
  const Tensor out = ops::resample_fft(ctx_, wav.reshape({C, N}), stretched_length(N));
  return ctx_.download(out);
}

}  // namespace avdit::models::vae::oobleck

namespace avdit::models::vae {
std::unique_ptr<Decoder> open_oobleck(ops::Context& ctx, const std::filesystem::path& dir) {
  return std::make_unique<oobleck::OobleckDecoder>(ctx, dir);
}
}  // namespace avdit::models::vae
