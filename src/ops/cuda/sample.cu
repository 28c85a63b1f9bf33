// The device solvers' and CFG's kernels: the per-element math of sample/elementwise.h (the CPU
// solvers' own), coefficients planned on the host. Grid-stride loops, one launch per step and modality.
#include <algorithm>

#include "backend/cuda/context.h"
#include "ops/sample.h"

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

constexpr int kMaxCfgScales = 1024;

struct Scales {
  float s[kMaxCfgScales];
  int count;
};

__global__ void cfg_kernel(const float* cond, const float* uncond, float* out, Scales scales, int64_t inner,
                           int64_t n) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < n; k += int64_t{gridDim.x} * blockDim.x)
    out[k] = sample::elem::cfg(cond[k], uncond[k], scales.s[(k / inner) % scales.count]);
}

void require_f32(ops::CudaContext& c, const Tensor& t, int64_t n, const char* what) {
  c.require_here(t, what);
  AVDIT_CHECK(t.dtype() == DType::F32 && t.numel() == n, "{}: expected F32 with {} elements, got {} {}", what, n,
              dtype_name(t.dtype()), t.shape_str());
}

float* f(const Tensor& t) { return static_cast<float*>(device_ptr(t)); }

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void unipc_step(CudaContext& c, const sample::elem::UniPCStepPlan& plan, const Tensor& velocity, const Tensor& latent,
                Tensor& history, Tensor& out) {
  const int64_t n = latent.numel();
  require_f32(c, velocity, n, "unipc_step velocity");
  require_f32(c, latent, n, "unipc_step latent");
  require_f32(c, history, 3 * n, "unipc_step history");
  require_f32(c, out, n, "unipc_step out");
  if (n == 0) return;
  float* h = f(history);
  unipc_step_kernel<<<blocks_for(n), kBlock, 0, c.stream()>>>(plan, f(velocity), f(latent), f(out), h, h + n,
                                                                h + 2 * n, n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void h3_euler(CudaContext& c, const Tensor& latent, const Tensor& velocity, float cc, float r, float one_minus_r,
              Tensor& out) {
  const int64_t n = latent.numel();
  require_f32(c, velocity, n, "h3_euler velocity");
  require_f32(c, latent, n, "h3_euler latent");
  require_f32(c, out, n, "h3_euler out");
  if (n == 0) return;
  h3_euler_kernel<<<blocks_for(n), kBlock, 0, c.stream()>>>(f(latent), f(velocity), f(out), cc, r, one_minus_r, n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void cfg(CudaContext& c, const Tensor& cond, const Tensor& uncond, const std::vector<float>& scales, int64_t inner,
         Tensor& out) {
  const int64_t n = cond.numel();
  require_f32(c, cond, n, "cfg cond");
  require_f32(c, uncond, n, "cfg uncond");
  require_f32(c, out, n, "cfg out");
  AVDIT_REQUIRE(!scales.empty() && scales.size() <= static_cast<size_t>(kMaxCfgScales) && inner >= 1,
                "CFG: {} scales (expected 1 to {}), inner {}", scales.size(), kMaxCfgScales, inner);
  if (n == 0) return;
  Scales sc{};
  std::copy(scales.begin(), scales.end(), sc.s);
  sc.count = static_cast<int>(scales.size());
  cfg_kernel<<<blocks_for(n), kBlock, 0, c.stream()>>>(f(cond), f(uncond), f(out), sc, inner, n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
