// The device solvers' and CFG's kernels: the per-element math of sample/elementwise.h (the CPU
// solvers' own), coefficients planned on the host. Grid-stride loops, one launch per step and modality.
#include <algorithm>

#include "backend/cuda/sample_kernels.h"

namespace avdit::cuda {
namespace {

constexpr int kBlock = 256;
unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kBlock - 1) / kBlock, 1, int64_t{1} << 20));
}

__global__ void unipc_step_kernel(sample::elem::UniPCStepPlan p, const float* velocity, const float* sample_in,
                                  float* sample_out, float* last_sample, float* m_last, float* m_prev, int64_t n) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < n; k += int64_t{gridDim.x} * blockDim.x) {
    float x = sample_in[k], ls = last_sample[k], ml = m_last[k], mp = m_prev[k];
    sample::elem::unipc_step(p, velocity[k], x, ls, ml, mp);
    sample_out[k] = x;
    last_sample[k] = ls;
    m_last[k] = ml;
    m_prev[k] = mp;
  }
}

__global__ void h3_euler_kernel(const float* x, const float* v, float* out, float c, float r, float one_minus_r,
                                int64_t n) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < n; k += int64_t{gridDim.x} * blockDim.x)
    out[k] = sample::elem::h3_euler(x[k], v[k], c, r, one_minus_r, nullptr);
}

struct Scales {
  float s[kMaxCfgScales];
  int count;
};

__global__ void cfg_kernel(const float* cond, const float* uncond, float* out, Scales scales, int64_t inner,
                           int64_t n) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < n; k += int64_t{gridDim.x} * blockDim.x)
    out[k] = sample::elem::cfg(cond[k], uncond[k], scales.s[(k / inner) % scales.count]);
}

}  // namespace

void launch_unipc_step(cudaStream_t stream, const sample::elem::UniPCStepPlan& plan, const float* velocity,
                       const float* sample_in, float* sample_out, float* history, int64_t n) {
  unipc_step_kernel<<<blocks_for(n), kBlock, 0, stream>>>(plan, velocity, sample_in, sample_out, history,
                                                          history + n, history + 2 * n, n);
}

void launch_h3_euler(cudaStream_t stream, const float* x, const float* v, float* out, float c, float r,
                     float one_minus_r, int64_t n) {
  h3_euler_kernel<<<blocks_for(n), kBlock, 0, stream>>>(x, v, out, c, r, one_minus_r, n);
}

void launch_cfg(cudaStream_t stream, const float* cond, const float* uncond, float* out, const float* scales,
                int count, int64_t inner, int64_t n) {
  Scales sc{};
  std::copy(scales, scales + count, sc.s);
  sc.count = count;
  cfg_kernel<<<blocks_for(n), kBlock, 0, stream>>>(cond, uncond, out, sc, inner, n);
}

}  // namespace avdit::cuda
