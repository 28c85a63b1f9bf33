// The samplers' element-wise work as ops: one FlowUniPC step, one H3 Euler step and classifier-free
// guidance, on F32 tensors of any context. Every element goes through sample/elementwise.h (one
// float32 rounding per torch op), so the CPU and the GPU give the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/dispatch.h"
#include "sample/elementwise.h"

namespace avdit::ops {

namespace cpu {
void unipc_step(const sample::elem::UniPCStepPlan& plan, const Tensor& velocity,
                const Tensor& latent, Tensor& history, Tensor& out);
void h3_euler(const Tensor& latent, const Tensor& velocity, float c, float r, float one_minus_r,
              Tensor& out);
void cfg(const Tensor& cond, const Tensor& uncond, const std::vector<float>& scales, int64_t inner,
         Tensor& out);
}  // namespace cpu
namespace cuda {
void unipc_step(CudaContext& c, const sample::elem::UniPCStepPlan& plan, const Tensor& velocity,
                const Tensor& latent, Tensor& history, Tensor& out);
void h3_euler(CudaContext& c, const Tensor& latent, const Tensor& velocity, float cc, float r,
              float one_minus_r, Tensor& out);
void cfg(CudaContext& c, const Tensor& cond, const Tensor& uncond, const std::vector<float>& scales,
         int64_t inner, Tensor& out);
}  // namespace cuda

// out = the next sample (elem::unipc_step per element); history [3, n] = last corrected sample,
// m_last, m_prev, updated in place (zeros before the first step). All F32 with n elements.
inline void unipc_step(Context& ctx, const sample::elem::UniPCStepPlan& plan,
                       const Tensor& velocity, const Tensor& latent, Tensor& history, Tensor& out) {
  AVDIT_OP(ctx, unipc_step, plan, velocity, latent, history, out);
}
// out = r x + (1 - r)(x + c v) per element (elem::h3_euler); F32 of one shape.
inline void h3_euler(Context& ctx, const Tensor& latent, const Tensor& velocity, float c, float r,
                     float one_minus_r, Tensor& out) {
  AVDIT_OP(ctx, h3_euler, latent, velocity, c, r, one_minus_r, out);
}
// out[k] = uncond[k] + s (cond[k] - uncond[k]) with s = scales[(k / inner) % scales.size()]
// (one scale, or one per latent frame with inner = H * W). F32 of one shape; at most 1,024 scales.
inline void cfg(Context& ctx, const Tensor& cond, const Tensor& uncond,
                const std::vector<float>& scales, int64_t inner, Tensor& out) {
  AVDIT_OP(ctx, cfg, cond, uncond, scales, inner, out);
}

}  // namespace avdit::ops
