// Latent (de-)normalisation with the layout change between [1, 48, T, H, W] and [T, H, W, 48].
#include "models/vae/wan22/latent_stats.h"

#include "core/error.h"
#include "io/finite.h"

namespace avdit::models::vae::wan22 {

Tensor denormalize_latents(const Tensor& latents, std::string_view what) {
  AVDIT_REQUIRE(latents.ndim() == 5 && latents.size(0) == 1 && latents.size(1) == kLatentChannels,
                "{} has shape {}, expected [1, {}, T, H, W] (batch 1, {} latent channels)", what,
                latents.shape_str(), kLatentChannels, kLatentChannels);
  AVDIT_REQUIRE(latents.size(2) > 0 && latents.size(3) > 0 && latents.size(4) > 0,
                "{} has shape {}: no frames or an empty frame", what, latents.shape_str());
  AVDIT_REQUIRE(latents.dtype() == DType::F32 || latents.dtype() == DType::BF16 ||
                    latents.dtype() == DType::F16,
                "{} has dtype {}, expected F32 (or BF16/F16)", what, dtype_name(latents.dtype()));
  const Tensor z = latents.to_f32();
  require_finite(z, what);
  const int64_t C = kLatentChannels, n = latents.numel() / C;
  Tensor out = Tensor::empty({latents.size(2), latents.size(3), latents.size(4), C}, DType::F32);
  const float* src = z.f32();
  float* dst = out.f32();
  for (int64_t c = 0; c < C; ++c) {
    const float inv_std = 1.0f / kLatentsStd[c], mean = kLatentsMean[c];
    for (int64_t i = 0; i < n; ++i) dst[i * C + c] = src[c * n + i] / inv_std + mean;
  }
  return out;
}

Tensor normalize_latents(const Tensor& mu) {
  AVDIT_CHECK(mu.ndim() == 4 && mu.size(3) == kLatentChannels && mu.dtype() == DType::F32,
              "normalize_latents: mu {}", mu.shape_str());
  const int64_t C = kLatentChannels, n = mu.numel() / C;
  Tensor out = Tensor::empty({1, C, mu.size(0), mu.size(1), mu.size(2)}, DType::F32);
  const float* src = mu.f32();
  float* dst = out.f32();
  for (int64_t c = 0; c < C; ++c) {
    const float inv_std = 1.0f / kLatentsStd[c], mean = kLatentsMean[c];
    for (int64_t i = 0; i < n; ++i) dst[c * n + i] = (src[i * C + c] - mean) * inv_std;
  }
  return out;
}

}  // namespace avdit::models::vae::wan22
