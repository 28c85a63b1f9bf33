// The samplers' element-wise steps on the CPU through sample/elementwise.h (see ops/sample.h).
#include "ops/sample.h"
#include "ops/cpu/common.h"

namespace avdit::ops::cpu {
namespace {
void require_f32(const Tensor& t, int64_t n, const char* what) {
  AVDIT_CHECK(t.dtype() == DType::F32 && t.numel() == n,
              "{}: expected F32 with {} elements, got {} {}", what, n, dtype_name(t.dtype()),
              t.shape_str());
}
}  // namespace

void unipc_step(const sample::elem::UniPCStepPlan& plan, const Tensor& velocity,
                const Tensor& latent, Tensor& history, Tensor& out) {
  const int64_t n = latent.numel();
  require_f32(velocity, n, "unipc_step velocity");
  require_f32(latent, n, "unipc_step latent");
  require_f32(history, 3 * n, "unipc_step history");
  require_f32(out, n, "unipc_step out");
  const float* v = velocity.f32();
  const float* x = latent.f32();
  float* h = history.f32();
  float* o = out.f32();
  for (int64_t i = 0; i < n; ++i) {
    float sample = x[i];
    sample::elem::unipc_step(plan, v[i], sample, h[i], h[n + i], h[2 * n + i]);
    o[i] = sample;
  }
}

void h3_euler(const Tensor& latent, const Tensor& velocity, float c, float r, float one_minus_r,
              Tensor& out) {
  const int64_t n = latent.numel();
  require_f32(velocity, n, "h3_euler velocity");
  require_f32(latent, n, "h3_euler latent");
  require_f32(out, n, "h3_euler out");
  const float* x = latent.f32();
  const float* v = velocity.f32();
  float* o = out.f32();
  for (int64_t i = 0; i < n; ++i)
    o[i] = sample::elem::h3_euler(x[i], v[i], c, r, one_minus_r, nullptr);
}

void cfg(const Tensor& cond, const Tensor& uncond, const std::vector<float>& scales, int64_t inner,
         Tensor& out) {
  const int64_t n = cond.numel();
  require_f32(cond, n, "cfg cond");
  require_f32(uncond, n, "cfg uncond");
  require_f32(out, n, "cfg out");
  AVDIT_CHECK(!scales.empty() && inner >= 1, "cfg: {} scales, inner {}", scales.size(), inner);
  const int64_t count = static_cast<int64_t>(scales.size());
  const float *c = cond.f32(), *u = uncond.f32();
  float* o = out.f32();
  for (int64_t i = 0; i < n; ++i) o[i] = sample::elem::cfg(c[i], u[i], scales[(i / inner) % count]);
}

}  // namespace avdit::ops::cpu
