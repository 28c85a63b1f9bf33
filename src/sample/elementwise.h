// The per-element arithmetic of the samplers (FlowUniPC, H3 Euler, CFG), written once for the CPU
// loops and the CUDA kernels (src/backend/cuda/sample_cuda.cu), so both give the same bits. Each
// product and sum is one float32 rounding, as the separate torch ops of the references: on the
// device the _rn intrinsics stop nvcc from contracting a*b+c into an FMA (the host compiler does
// not contract on x86-64 without -march). Must stay C++17 (nvcc compiles it).
#pragma once

#if defined(__CUDACC__)
#define AVDIT_HD __host__ __device__
#else
#define AVDIT_HD
#endif

namespace avdit::sample::elem {

AVDIT_HD inline float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
AVDIT_HD inline float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
AVDIT_HD inline float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// One UniPC update (corrector or predictor) as host-computed coefficients:
//   x_t_ = ratio x - c_m0 m0;   out = x_t_ - c_res * res
// order 1 corrector: res = 0 + 0.5 (mt - m0); order 2 corrector: res = rho0 d1 + rho1 (mt - m0);
// order 1 predictor: out = x_t_;               order 2 predictor: res = 0.5 d1;
// with d1 = (m1 - m0) * inv_rk (torch divides by a CPU scalar through its float32 reciprocal).
struct UniPCUpdate {
  int order = 1;
  float ratio = 0, c_m0 = 0, c_res = 0;
  float rho0 = 0, rho1 = 0, inv_rk = 0;
};

// What one FlowUniPC step does to every element: convert with `sigma`, correct (when `correct`),
// shift the history, predict.
struct UniPCStepPlan {
  float sigma = 0;
  bool correct = false;
  UniPCUpdate corrector, predictor;
};

AVDIT_HD inline float unipc_correct(const UniPCUpdate& u, float x, float m0, float mt, float m1) {
  const float x_t_ = sub(mul(u.ratio, x), mul(u.c_m0, m0));
  const float d1_t = sub(mt, m0);
  if (u.order == 1) return sub(x_t_, mul(u.c_res, add(0.0f, mul(0.5f, d1_t))));
  const float d1 = mul(sub(m1, m0), u.inv_rk);
  return sub(x_t_, mul(u.c_res, add(mul(u.rho0, d1), mul(u.rho1, d1_t))));
}

AVDIT_HD inline float unipc_predict(const UniPCUpdate& u, float x, float m0, float m1) {
  const float x_t_ = sub(mul(u.ratio, x), mul(u.c_m0, m0));
  if (u.order == 1) return x_t_;
  const float d1 = mul(sub(m1, m0), u.inv_rk);
  return sub(x_t_, mul(u.c_res, mul(0.5f, d1)));
}

// One element of a FlowUniPC step. `sample` holds x_i on entry and x_{i+1} on return; the history
// (last corrected sample, the last two x0 predictions m_last, m_prev) is updated in place.
AVDIT_HD inline void unipc_step(const UniPCStepPlan& p, float velocity, float& sample, float& last_sample,
                                float& m_last, float& m_prev) {
  const float m_new = sub(sample, mul(p.sigma, velocity));  // convert_model_output (x0 prediction)
  float x = sample;
  if (p.correct) x = unipc_correct(p.corrector, last_sample, m_last, m_new, m_prev);
  m_prev = m_last;
  m_last = m_new;
  last_sample = x;
  sample = unipc_predict(p.predictor, x, m_new, m_prev);
}

// H3 Euler (eta 0): x0 = x + c v with c = 1 - t; x_next = r x + (1 - r) x0.
AVDIT_HD inline float h3_euler(float x, float v, float c, float r, float one_minus_r, float* x0_out) {
  const float x0 = add(x, mul(c, v));
  if (x0_out) *x0_out = x0;
  return add(mul(r, x), mul(one_minus_r, x0));
}

// CFG: uncond + scale (cond - uncond).
AVDIT_HD inline float cfg(float cond, float uncond, float scale) { return add(uncond, mul(scale, sub(cond, uncond))); }

}  // namespace avdit::sample::elem
