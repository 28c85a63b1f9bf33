// mHC coefficients and stream mixing (see mhc.h); float32 in the reference's operation order.
#include "models/magi2/mhc.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/ops.h"

namespace avdit::models::magi2 {
namespace {

float sigmoidf(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Sinkhorn-Knopp on one n x n matrix (row-major): M = exp(Z - max Z); columns then rows, kSinkhornIters times.
void sinkhorn(float* m, int64_t n) {
  float mx = m[0];
  for (int64_t i = 0; i < n * n; ++i) mx = std::max(mx, m[i]);
  for (int64_t i = 0; i < n * n; ++i) m[i] = std::exp(m[i] - mx);
  for (int it = 0; it < kSinkhornIters; ++it) {
    for (int64_t j = 0; j < n; ++j) {
      float col = 0;
      for (int64_t i = 0; i < n; ++i) col += m[i * n + j];
      const float d = col + kSinkhornEps;
      for (int64_t i = 0; i < n; ++i) m[i * n + j] /= d;
    }
    for (int64_t i = 0; i < n; ++i) {
      float row = 0;
      for (int64_t j = 0; j < n; ++j) row += m[i * n + j];
      const float d = row + kSinkhornEps;
      for (int64_t j = 0; j < n; ++j) m[i * n + j] /= d;
    }
  }
}

}  // namespace

MhcCoefficients mhc_coefficients(const Tensor& s, const Tensor& norm_weight, int64_t groups, const TokenLayout& layout,
                                 const MhcBranchWeights& w, int64_t n, int64_t hidden) {
  const int64_t width = n * hidden;
  const Tensor y = apply_grouped(s, groups, layout, [&](int64_t g, const Tensor& rows) {
    return ops::rms_norm(rows, norm_weight.slice_rows(g * width, (g + 1) * width), 1e-6f, true);
  });
  const Tensor hf = ops::matmul(y, w.phi);  // [L, 2n + n*n]
  const int64_t L = hf.size(0), cols = 2 * n + n * n;
  AVDIT_CHECK(hf.size(1) == cols, "mhc phi width");
  // torch: alpha (f32) * matmul_scale (python float -> f32) * x + bias.
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(width)));
  const float a_pre = w.alpha_pre * scale, a_post = w.alpha_post * scale, a_res = w.alpha_res * scale;
  MhcCoefficients c;
  c.h_pre = Tensor::empty({L, n}, DType::F32);
  c.h_post = Tensor::empty({L, n}, DType::F32);
  c.h_res = Tensor::empty({L, n, n}, DType::F32);
  const float* h = hf.f32();
  const float* bpre = w.bias_pre.f32();
  const float* bpost = w.bias_post.f32();
  const float* bres = w.bias_res.f32();
  float* pre = c.h_pre.f32();
  float* post = c.h_post.f32();
  float* res = c.h_res.f32();
  for (int64_t l = 0; l < L; ++l) {
    const float* r = h + l * cols;
    for (int64_t k = 0; k < n; ++k) {
      pre[l * n + k] = sigmoidf(a_pre * r[k] + bpre[k]);
      post[l * n + k] = 2.0f * sigmoidf(a_post * r[n + k] + bpost[k]);
    }
    float* m = res + l * n * n;
    for (int64_t k = 0; k < n * n; ++k) m[k] = a_res * r[2 * n + k] + bres[k];
    sinkhorn(m, n);
  }
  return c;
}

Tensor mhc_apply_pre(const Tensor& s, const Tensor& h_pre, int64_t n) {
  const int64_t L = s.size(0), hidden = s.size(1) / n;
  Tensor out = Tensor::zeros({L, hidden}, DType::F32);
  const float* sv = s.f32();
  const float* hp = h_pre.f32();
  float* o = out.f32();
  for (int64_t l = 0; l < L; ++l) {
    float* orow = o + l * hidden;
    for (int64_t k = 0; k < n; ++k) {
      const float c = hp[l * n + k];
      const float* srow = sv + (l * n + k) * hidden;
      for (int64_t x = 0; x < hidden; ++x) orow[x] += c * srow[x];
    }
  }
  return out;
}

Tensor mhc_hyper_connect(const Tensor& s, const Tensor& out, const Tensor& h_post, const Tensor& h_res, int64_t n) {
  const int64_t L = s.size(0), hidden = s.size(1) / n;
  const Tensor o32 = out.to_f32();
  Tensor result = Tensor::zeros({L, n * hidden}, DType::F32);
  const float* sv = s.f32();
  const float* ov = o32.f32();
  const float* hp = h_post.f32();
  const float* hr = h_res.f32();
  float* r = result.f32();
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t i = 0; i < n; ++i) {
      float* rrow = r + (l * n + i) * hidden;
      for (int64_t j = 0; j < n; ++j) {
        const float c = hr[(l * n + i) * n + j];
        const float* srow = sv + (l * n + j) * hidden;
        for (int64_t x = 0; x < hidden; ++x) rrow[x] += c * srow[x];
      }
      const float c = hp[l * n + i];
      const float* orow = ov + l * hidden;
      for (int64_t x = 0; x < hidden; ++x) rrow[x] += c * orow[x];
    }
  }
  return result;
}

}  // namespace avdit::models::magi2
