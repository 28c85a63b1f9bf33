// Timestep conditioning of H3: the cos-first sinusoid of t = 1 - sigma (not scaled by 1000),
// the fp32 time_embedder MLP, and the adaLN input shared by every block and the final layer.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "models/h3/config.h"
#include "models/h3/weights.h"

namespace avdit::models::h3 {

// [M, dim]: [cos(t f_0..f_{k-1}), sin(t f_0..f_{k-1})], k = dim / 2, f_j = exp(-ln(1e4) j / k).
Tensor timestep_sinusoid(const std::vector<float>& timesteps, int64_t dim);

struct TimeEmbedding {
  Tensor t_emb;        // [M, Dt] time_embedder output (undefined in the curve variant)
  Tensor adaln_input;  // [M, Dt] input of every adaln_proj.linear
};

// Full variant: t_emb = proj_out(silu(proj_in(sinusoid))), adaln_input = silu(t_emb), all fp32.
// Curve variant: adaln_input = linear interpolation of adaln_t_table at t (silu is baked in).
TimeEmbedding embed_timesteps(const H3Weights& w, const H3Config& config,
                              const std::vector<float>& unique_timesteps);

}  // namespace avdit::models::h3
