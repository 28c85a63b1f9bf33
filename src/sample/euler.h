// The H3 reference's Euler (eta 0) update of one modality on its own sigma schedule, float32.
// H3's velocity points toward the data: x0 = x_t + sigma v (not the sd.cpp sign convention).
#pragma once

#include <span>

#include "core/tensor.h"

namespace avdit::sample {

// One step k of one modality (MiniMax-H3 reference, sampling.py rf_velocity_to_x0 + euler_eta0_step):
//   x0     = x + (1 - t) v                 with t = H3Schedule::{video,audio}_t[k] = fp32(1 - sigma_k)
//   x_next = r x + (1 - r) x0              with r = H3Schedule::{video,audio}_ratio[k] = sigma_{k+1}/sigma_k
// each product and sum rounded to float32 once, as the separate torch ops do. `x` is updated in place;
// `denoised`, if not empty, receives x0. Per modality with its own t and r: the audio does NOT use the
// sd.cpp chain-rule form (sigma_v-driven with the d sigma_a / d sigma_v slope).
void h3_euler_step(std::span<float> x, std::span<const float> velocity, float t, float ratio,
                   std::span<float> denoised = {});

// Same on float32 tensors of equal shape; returns x_next (and x0 in *denoised if given).
Tensor h3_euler_step(const Tensor& x, const Tensor& velocity, float t, float ratio,
                     Tensor* denoised = nullptr);

}  // namespace avdit::sample
