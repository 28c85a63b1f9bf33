// Samplers and CFG on the device: the FlowUniPC and H3 Euler solvers and classifier-free guidance
// over F32 device tensors, so a GPU run keeps its latents on the GPU from the first step to the
// last. Bit-identical to the CPU solvers: the coefficients come from the same host planner
// (sample/unipc.h) and every element goes through the same arithmetic (sample/elementwise.h).
#pragma once

#include <memory>
#include <vector>

#include "backend/cuda/device.h"
#include "pipeline/generate_common.h"
#include "sample/sampler_loop.h"

namespace avdit::cuda {

// FlowUniPC (MAGI-2) on the given sigmas; its history buffers live on the device.
std::unique_ptr<sample::Stepper> make_unipc_stepper(Device& dev, std::vector<float> sigmas);
// H3 Euler on one modality's t and ratio lists.
std::unique_ptr<sample::Stepper> make_h3_euler_stepper(Device& dev, std::vector<float> t, std::vector<float> ratio);

// out = uncond + s (cond - uncond) on F32 device tensors of one shape. `scales` holds one scale, or
// one per frame: element k uses scales[(k / inner) % scales.size()] (MAGI-2 video [B, C, T, H, W]:
// inner = H*W, one scale per latent frame from sample::magi2_video_scales).
Tensor cfg_combine(Device& dev, const Tensor& cond, const Tensor& uncond, const std::vector<float>& scales,
                   int64_t inner = 1);

// Copies of sampler tensors between host and device for the observers (trajectory recording and
// teacher forcing read and write host tensors): undefined stays undefined.
Tensor to_host_f32(Device& dev, const Tensor& t);

// All of the above as the generate pipelines' sampler backend (latents live on `dev`).
pipeline::SamplerBackend sampler_backend(Device& dev);

}  // namespace avdit::cuda
