// Seeded latent noise: element i of the unpacked latent = rng_normal(seed, stream, i).
#include "sample/noise.h"

#include "core/error.h"
#include "core/rng.h"

namespace avdit::sample {

Tensor make_noise(const Shape& unpacked_latent_shape, uint64_t seed, uint64_t stream) {
  for (int64_t d : unpacked_latent_shape)
    AVDIT_REQUIRE(d >= 0, "noise: expected a non-negative latent shape, got {}", shape_str(unpacked_latent_shape));
  Tensor t = Tensor::empty(unpacked_latent_shape, DType::F32);
  fill_normal(t, seed, stream, 0.0f, 1.0f);
  return t;
}

}  // namespace avdit::sample
