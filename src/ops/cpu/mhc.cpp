// mHC on the CPU (see ops/mhc.h): the MAGI-2 model's float32 arithmetic, step by step.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/common.h"
#include "ops/linear.h"
#include "ops/mhc.h"

namespace avdit::ops::cpu {
namespace {

float sigmoidf(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Sinkhorn-Knopp on one n x n matrix (row-major): M = exp(Z - max Z); columns then rows.
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

void mhc_logits(const Tensor& s, const RmsNormWeight& w, float eps, const Tensor& phi,
                Tensor& out) {
  AVDIT_CHECK(s.ndim() == 2 && phi.ndim() == 2 && phi.size(0) == s.size(1) &&
                  out.numel() == s.size(0) * phi.size(1),
              "mhc_logits: s {} phi {} out {}", s.shape_str(), phi.shape_str(), out.shape_str());
  Tensor y = Tensor::empty(s.shape(), DType::F32);
  rms_norm(s, w, eps, y);
  matmul(y, phi, out);
}

void mhc_coefficients(const Tensor& logits_in, const MhcParams& p, int64_t n, DType round,
                      MhcCoefficients& c) {
  const int64_t cols = 2 * n + n * n;
  AVDIT_CHECK(logits_in.ndim() == 2 && logits_in.size(1) == cols,
              "mhc: logits {} for {} streams (expected [L, {}])", logits_in.shape_str(), n, cols);
  const int64_t L = logits_in.size(0);
  AVDIT_CHECK(c.h_pre.numel() == L * n && c.h_post.numel() == L * n &&
                  c.h_res.numel() == L * n * n && c.h_pre.dtype() == DType::F32 &&
                  c.h_post.dtype() == DType::F32 && c.h_res.dtype() == DType::F32,
              "mhc: outputs must be F32 [{}, {}], [{}, {}], [{}, {}, {}]", L, n, L, n, L, n, n);
  AVDIT_CHECK(p.bias_pre.numel() == n && p.bias_post.numel() == n && p.bias_res.numel() == n * n,
              "mhc: biases {} {} {} for {} streams", p.bias_pre.shape_str(),
              p.bias_post.shape_str(), p.bias_res.shape_str(), n);
  const Tensor hf = f32(logits_in), bp = f32(p.bias_pre), bq = f32(p.bias_post),
               br = f32(p.bias_res);
  const float* h = hf.f32();
  const float *bpre = bp.f32(), *bpost = bq.f32(), *bres = br.f32();
  float* pre = c.h_pre.f32();
  float* post = c.h_post.f32();
  float* res = c.h_res.f32();
  for (int64_t l = 0; l < L; ++l) {
    const float* r = h + l * cols;
    for (int64_t k = 0; k < n; ++k) {
      pre[l * n + k] = round_to(round, sigmoidf(p.a_pre * r[k] + bpre[k]));
      post[l * n + k] = round_to(round, 2.0f * sigmoidf(p.a_post * r[n + k] + bpost[k]));
    }
    float* m = res + l * n * n;
    for (int64_t k = 0; k < n * n; ++k) m[k] = p.a_res * r[2 * n + k] + bres[k];
    sinkhorn(m, n);
    for (int64_t k = 0; k < n * n; ++k) m[k] = round_to(round, m[k]);
  }
}

void mhc_apply_pre(const Tensor& s_in, const Tensor& h_pre_in, int64_t n, Tensor& out) {
  AVDIT_CHECK(s_in.ndim() == 2 && n >= 1 && s_in.size(1) % n == 0,
              "mhc_apply_pre: s {} for {} streams", s_in.shape_str(), n);
  const int64_t L = s_in.size(0), hidden = s_in.size(1) / n;
  AVDIT_CHECK(h_pre_in.numel() == L * n && out.numel() == L * hidden,
              "mhc_apply_pre: h_pre {} out {} for s {}", h_pre_in.shape_str(), out.shape_str(),
              s_in.shape_str());
  const Tensor s = f32(s_in), hpre = f32(h_pre_in);
  std::vector<float> o(static_cast<size_t>(L * hidden), 0.f);
  const float* sv = s.f32();
  const float* hp = hpre.f32();
  for (int64_t l = 0; l < L; ++l) {
    float* orow = o.data() + l * hidden;
    for (int64_t k = 0; k < n; ++k) {
      const float c = hp[l * n + k];
      const float* srow = sv + (l * n + k) * hidden;
      for (int64_t x = 0; x < hidden; ++x) orow[x] += c * srow[x];
    }
  }
  store(out, o.data());
}

void mhc_hyper_connect_(Tensor& s, const Tensor& o_in, const Tensor& h_post_in,
                        const Tensor& h_res_in, int64_t n) {
  AVDIT_CHECK(s.ndim() == 2 && n >= 1 && s.size(1) % n == 0,
              "mhc_hyper_connect: s {} for {} streams", s.shape_str(), n);
  const int64_t L = s.size(0), hidden = s.size(1) / n;
  AVDIT_CHECK(
      o_in.numel() == L * hidden && h_post_in.numel() == L * n && h_res_in.numel() == L * n * n,
      "mhc_hyper_connect: branch output {} h_post {} h_res {} for s {}", o_in.shape_str(),
      h_post_in.shape_str(), h_res_in.shape_str(), s.shape_str());
  const Tensor sf = f32(s), o = f32(o_in), hpost = f32(h_post_in), hres = f32(h_res_in);
  std::vector<float> r(static_cast<size_t>(L * n * hidden), 0.f);
  const float* sv = sf.f32();
  const float* ov = o.f32();
  const float* hp = hpost.f32();
  const float* hr = hres.f32();
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t i = 0; i < n; ++i) {
      float* rrow = r.data() + (l * n + i) * hidden;
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
  store(s, r.data());
}

}  // namespace avdit::ops::cpu
