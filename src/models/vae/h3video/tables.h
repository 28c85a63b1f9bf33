// Host-built tables of one tile shape (t, h, w latent cells): the RoPE table of its tokens, the
// token order of the latent, and the patch-to-pixel permutation. Built once per shape in a decode.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "models/vae/h3video/config.h"

namespace avdit::models::vae::h3video {

// RotaryEmbeddingND (3 axes, use_angle) over the N = t h w + suffix tokens of a tile: per axis the
// length-normalised coordinate c_k = 2 (k + 0.5) / n - 1 (suffix tokens: 0), angle = 2 pi c
// inv_freq_j with inv_freq_j = 1 / theta^(6 j / d_r), flattened axis-major: the d_r / 2 angles of
// rotate-half RoPE on each head's first d_r dims (the reference tiles them twice; the dims past d_r
// pass), as ops::qk_norm_rope_per_head takes them.
struct RopeTable {
  Tensor cos, sin;  // F32 [N, d_r / 2] on the host
};
RopeTable rope_table(const H3VideoConfig& c, int64_t t, int64_t h, int64_t w, int64_t suffix);

// The flat index of element (c, ft, y, x) of the decoded tile [C, ratio_t t, ratio h, ratio w] in
// proj_out's output [t h w, C ratio_t ratio^2] (feature c, pt, ph, pw; _unpack_tensors_3d): an I32
// host tensor for gather_elements.
Tensor unpatchify_index(const H3VideoConfig& c, int64_t t, int64_t h, int64_t w);

// latent [Z, T, H, W] flat -> tokens [T H W, Z] in (t, h, w) raster order (_pack_tensors_3d with
// patch 1): I32 host tensor for gather_elements.
Tensor tokens_index(int64_t Z, int64_t T, int64_t H, int64_t W);

}  // namespace avdit::models::vae::h3video
