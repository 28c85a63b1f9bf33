// Launchers of the device solver and CFG kernels (sample_kernels.cu) on raw F32 device pointers.
// C++17 (nvcc compiles the .cu): the tensor-level host side is sample_cuda.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sample/elementwise.h"

namespace avdit::cuda {

// One FlowUniPC step over n elements; history = [last_sample | m_last | m_prev], 3n floats.
void launch_unipc_step(cudaStream_t stream, const sample::elem::UniPCStepPlan& plan, const float* velocity,
                       const float* sample_in, float* sample_out, float* history, int64_t n);
void launch_h3_euler(cudaStream_t stream, const float* x, const float* v, float* out, float c, float r,
                     float one_minus_r, int64_t n);
// out[k] = cfg(cond[k], uncond[k], scales[(k / inner) % count]); count <= kMaxCfgScales.
constexpr int kMaxCfgScales = 1024;
void launch_cfg(cudaStream_t stream, const float* cond, const float* uncond, float* out, const float* scales,
                int count, int64_t inner, int64_t n);

}  // namespace avdit::cuda
