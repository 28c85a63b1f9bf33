// Timestep conditioning of H3 computed on the host: the cos-first sinusoid of t = 1 - sigma (not
// scaled by 1000) that enters the fp32 time_embedder MLP (H3Model::tables), and the curve variant's
// interpolated table.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "models/h3/config.h"

namespace avdit::models::h3 {

// [M, dim]: [cos(t f_0..f_{k-1}), sin(t f_0..f_{k-1})], k = dim / 2, f_j = exp(-ln(1e4) j / k).
Tensor timestep_sinusoid(const std::vector<float>& timesteps, int64_t dim);

// The curve variant's adaLN input: linear interpolation of adaln_t_table [grid, k] at each t (silu
// is baked into the table), on the host: [M, k] F32.
Tensor interpolate_adaln_curve(const Tensor& table, const std::vector<float>& unique_timesteps);

}  // namespace avdit::models::h3
