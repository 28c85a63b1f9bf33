// The per-shape tables of the H3 video decoder (tables.h), in float32 as the reference's
// create_token_ids and RotaryEmbeddingND compute them.
#include "models/vae/h3video/tables.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "core/error.h"

namespace avdit::models::vae::h3video {

RopeTable rope_table(const H3VideoConfig& c, int64_t t, int64_t h, int64_t w, int64_t suffix) {
  const int64_t dr = c.rope_dim(), per_axis = dr / 6, half = dr / 2;
  const int64_t cells = t * h * w, N = cells + suffix;
  std::vector<float> inv(static_cast<size_t>(per_axis));
  for (int64_t j = 0; j < per_axis; ++j) {
    // torch.arange(0, 1, 6 / d_r) in float32, then 1 / theta ** e.
    const float e = static_cast<float>(j) * (6.0f / static_cast<float>(dr));
    inv[j] = 1.0f / std::pow(static_cast<float>(c.rope_theta), e);
  }
  auto coord = [](int64_t k, int64_t n) {
    const float x = (static_cast<float>(k) + 0.5f) / static_cast<float>(n);
    return 2.0f * x - 1.0f;
  };
  const float scale = static_cast<float>(2.0 * std::numbers::pi);
  std::vector<float> cs(static_cast<size_t>(N * half)), sn(cs.size());
  for (int64_t n = 0; n < N; ++n) {
    float pos[3] = {0.f, 0.f, 0.f};
    if (n < cells)
      pos[0] = coord(n / (h * w), t), pos[1] = coord(n / w % h, h), pos[2] = coord(n % w, w);
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t j = 0; j < per_axis; ++j) {
        const float angle = scale * pos[a] * inv[j];
        cs[n * half + a * per_axis + j] = static_cast<float>(std::cos(static_cast<double>(angle)));
        sn[n * half + a * per_axis + j] = static_cast<float>(std::sin(static_cast<double>(angle)));
      }
  }
  return {Tensor::from_floats(std::move(cs), {N, half}), Tensor::from_floats(std::move(sn), {N, half})};
}

Tensor unpatchify_index(const H3VideoConfig& c, int64_t t, int64_t h, int64_t w) {
  const int64_t C = c.out_channels, pt = c.ratio_t, p = c.ratio, F = c.patch_features();
  const int64_t T = t * pt, H = h * p, W = w * p, n = C * T * H * W;
  AVDIT_REQUIRE(n < (int64_t{1} << 31), "H3 video VAE: a tile of {} values exceeds the I32 index",
                n);
  Tensor idx = Tensor::empty({C, T, H, W}, DType::I32);
  int32_t* out = idx.data<int32_t>();
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t f = 0; f < T; ++f)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const int64_t token = (f / pt * h + y / p) * w + x / p;
          const int64_t feature = ((ch * pt + f % pt) * p + y % p) * p + x % p;
          *out++ = static_cast<int32_t>(token * F + feature);
        }
  return idx;
}

Tensor tokens_index(int64_t Z, int64_t T, int64_t H, int64_t W) {
  const int64_t cells = T * H * W;
  AVDIT_REQUIRE(Z * cells < (int64_t{1} << 31),
                "H3 video VAE: a latent of {} values exceeds the I32 index", Z * cells);
  Tensor idx = Tensor::empty({cells, Z}, DType::I32);
  int32_t* out = idx.data<int32_t>();
  for (int64_t n = 0; n < cells; ++n)
    for (int64_t z = 0; z < Z; ++z) *out++ = static_cast<int32_t>(z * cells + n);
  return idx;
}

}  // namespace avdit::models::vae::h3video
