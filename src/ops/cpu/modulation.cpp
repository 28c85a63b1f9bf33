// The fused adaLN block steps on the CPU, one step after the other with the reference's rounding
// points (see ops/modulation.h).
#include <cmath>
#include <vector>

#include "ops/cpu/common.h"
#include "ops/modulation.h"

namespace avdit::ops::cpu {
namespace {

// Row i of the table columns, as float32.
struct Cols {
  Tensor t;
  int64_t col = 0, width = 0;
  explicit Cols(const TableColumns& c) : col(c.col) {
    if (c.defined()) {
      t = f32(c.table);
      width = t.size(-1);
    }
  }
  const float* row(int64_t i) const { return t.f32() + i * width + col; }
};

}  // namespace

void residual_norm_modulate(Tensor& x_t, const ResidualNormModulate& a, Tensor* out) {
  AVDIT_CHECK(x_t.ndim() == 2, "residual_norm_modulate: x must be [S, H], got {}", x_t.shape_str());
  const int64_t S = x_t.size(0), H = x_t.size(1);
  const DType xt = x_t.dtype();
  auto Rx = [xt](float v) { return round_to(xt, v); };
  Tensor x = x_t.to_f32().clone();
  float* px = x.f32();
  const Cols gate(a.gate), shift(a.shift), scale(a.scale);
  if (a.f) {
    AVDIT_CHECK(a.f->numel() == S * H, "residual_norm_modulate: f {} for x {}", a.f->shape_str(),
                x_t.shape_str());
    AVDIT_CHECK(!a.gate.defined() || a.row, "residual_norm_modulate: a gate needs row indices");
    const Tensor f = f32(*a.f);
    for (int64_t r = 0; r < S; ++r) {
      float* xr = px + r * H;
      const float* fr = f.f32() + r * H;
      if (a.gate.defined()) {
        const float* g = gate.row(index_at(*a.row, r));
        for (int64_t c = 0; c < H; ++c) {
          const float gf = a.zero_gate_guard && g[c] == 0.0f ? 0.0f : Rx(g[c] * fr[c]);
          xr[c] = Rx(xr[c] + gf);
        }
      } else {
        for (int64_t c = 0; c < H; ++c) xr[c] = Rx(xr[c] + fr[c]);
      }
    }
    store(x_t, px);
  }
  if (!out) return;
  AVDIT_CHECK(out->numel() == S * H, "residual_norm_modulate: out {} for x {}", out->shape_str(),
              x_t.shape_str());
  AVDIT_CHECK(!a.shift.defined() || a.row2, "residual_norm_modulate: modulation needs row indices");
  const DType act = a.act.value_or(xt);
  auto R = [act](float v) { return round_to(act, v); };
  const Tensor w = f32(a.w);
  AVDIT_CHECK(w.numel() == H, "residual_norm_modulate: norm weight {} for rows of {}",
              w.shape_str(), H);
  std::vector<float> h(static_cast<size_t>(S * H));
  for (int64_t r = 0; r < S; ++r) {
    const float* xr = px + r * H;
    double ss = 0;
    for (int64_t c = 0; c < H; ++c) ss += static_cast<double>(xr[c]) * xr[c];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(H) + a.eps));
    float* hr = h.data() + r * H;
    for (int64_t c = 0; c < H; ++c) hr[c] = R(xr[c] * inv * w.f32()[c]);
    if (a.shift.defined()) {
      const int64_t t = index_at(*a.row2, r);
      const float *sh = shift.row(t), *sc = scale.row(t);
      for (int64_t c = 0; c < H; ++c) hr[c] = R(R(hr[c] * R(1.0f + sc[c])) + sh[c]);
    }
  }
  store(*out, h.data());
}

void qk_norm_rope_per_head(const Tensor& qkv_in, const Tensor& q_norm, const Tensor& k_norm,
                           float eps, const Tensor* cos, const Tensor* sin, Tensor& q, Tensor& k,
                           Tensor& v) {
  AVDIT_CHECK(qkv_in.ndim() == 4 && qkv_in.size(2) == 3,
              "qk_norm_rope: qkv must be [S, heads, 3, D], got {}", qkv_in.shape_str());
  const int64_t S = qkv_in.size(0), heads = qkv_in.size(1), D = qkv_in.size(3);
  const DType act = qkv_in.dtype();
  auto R = [act](float x) { return round_to(act, x); };
  const Tensor qkv = f32(qkv_in), qw = f32(q_norm), kw = f32(k_norm);
  AVDIT_CHECK(qw.numel() == D && kw.numel() == D,
              "qk_norm_rope: norm weights {} / {} for heads of {}", qw.shape_str(), kw.shape_str(),
              D);
  Tensor c, s;
  int64_t half = 0;
  if (cos) {
    c = f32(*cos);
    s = f32(*sin);
    half = c.size(-1);
    AVDIT_CHECK(c.numel() == S * half && s.numel() == S * half && 2 * half <= D,
                "qk_norm_rope: cos {} sin {}", c.shape_str(), s.shape_str());
  }
  std::vector<float> qo(static_cast<size_t>(S * heads * D)), ko(qo.size()), vo(qo.size());
  for (int64_t t = 0; t < S; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const float* g = qkv.f32() + (t * heads + h) * 3 * D;
      float* dst[2] = {qo.data() + (t * heads + h) * D, ko.data() + (t * heads + h) * D};
      const float* w[2] = {qw.f32(), kw.f32()};
      for (int part = 0; part < 2; ++part) {
        const float* a = g + part * D;
        double ss = 0;
        for (int64_t i = 0; i < D; ++i) ss += static_cast<double>(a[i]) * a[i];
        const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(D) + eps));
        float* o = dst[part];
        for (int64_t i = 0; i < D; ++i) o[i] = R(a[i] * inv * w[part][i]);
        if (cos) {
          for (int64_t i = 0; i < half; ++i) {
            const float cc = c.f32()[t * half + i], sn = s.f32()[t * half + i];
            const float x0 = o[i], x1 = o[i + half];
            o[i] = R(x0 * cc - x1 * sn);
            o[i + half] = R(x1 * cc + x0 * sn);
          }
        }
      }
      std::copy(g + 2 * D, g + 3 * D, vo.data() + (t * heads + h) * D);
    }
  store(q, qo.data());
  store(k, ko.data());
  store(v, vo.data());
}

}  // namespace avdit::ops::cpu
