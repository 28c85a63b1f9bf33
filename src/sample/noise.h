// Seeded initial noise for sampling from the counter-based Philox generator of core/rng.h, so the
// same seed gives the same latent noise on any device, thread count or storage layout.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace avdit::sample {

// Streams of the two modalities, so video and audio noise are independent for one seed.
inline constexpr uint64_t kVideoNoiseStream = 0x766964656f;  // "video"
inline constexpr uint64_t kAudioNoiseStream = 0x617564696f;  // "audio"

// A float32 tensor of shape `unpacked_latent_shape` (the family's unpacked latent layout, e.g. MAGI-2
// video [B, 48, T, H, W], H3 audio [2, 32, T_a]) whose element with row-major index i in that
// unpacked layout is rng_normal(seed, stream, i). The numbers are tied to the unpacked index, not to
// any packed/patchified token order, so a model that packs the latent differently still starts from
// the same noise; a GPU fill computing rng_normal(seed, stream, i) per element gives identical bits.
// This is NOT the references' torch.randn noise; to reproduce a reference run, pass its noise as a file.
Tensor make_noise(const Shape& unpacked_latent_shape, uint64_t seed, uint64_t stream);

}  // namespace avdit::sample
