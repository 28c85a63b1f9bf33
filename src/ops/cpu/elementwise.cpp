// Norms and element-wise ops on the CPU (float32; sums of squares accumulate in double).
#include <cmath>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "ops/ops.h"

namespace avdit::ops {

Tensor rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_weight) {
  const int64_t d = x.size(-1), rows = x.numel() / d;
  Tensor wf;
  if (w.defined()) {
    AVDIT_CHECK(w.numel() == d, "rms_norm: weight {} for rows of {}", w.shape_str(), d);
    wf = w.to_f32();
  }
  const float* pw = wf.defined() ? std::as_const(wf).f32() : nullptr;
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  const float* px = x.f32();
  float* py = y.f32();
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = px + r * d;
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(a[i]) * a[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
    float* o = py + r * d;
    for (int64_t i = 0; i < d; ++i) {
      const float g = pw ? (one_plus_weight ? 1.f + pw[i] : pw[i]) : 1.f;
      o[i] = a[i] * inv * g;
    }
  }
  return y;
}

namespace {
template <class F>
Tensor map(const Tensor& x, F f) {
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  const float* p = x.f32();
  float* q = y.f32();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) q[i] = f(p[i]);
  return y;
}
template <class F>
Tensor zip(const Tensor& a, const Tensor& b, F f) {
  AVDIT_CHECK(a.numel() == b.numel(), "element-wise op on {} and {}", a.shape_str(), b.shape_str());
  Tensor y = Tensor::empty(a.shape(), DType::F32);
  const float *p = a.f32(), *q = b.f32();
  float* r = y.f32();
  for (int64_t i = 0, n = a.numel(); i < n; ++i) r[i] = f(p[i], q[i]);
  return y;
}
}  // namespace

Tensor silu(const Tensor& x) {
  return map(x, [](float v) { return v / (1.f + std::exp(-v)); });
}
Tensor sigmoid(const Tensor& x) {
  return map(x, [](float v) { return 1.f / (1.f + std::exp(-v)); });
}
Tensor add(const Tensor& a, const Tensor& b) {
  return zip(a, b, [](float p, float q) { return p + q; });
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return zip(a, b, [](float p, float q) { return p * q; });
}

void add_(Tensor& a, const Tensor& b) {
  AVDIT_CHECK(a.numel() == b.numel(), "add_ on {} and {}", a.shape_str(), b.shape_str());
  float* p = a.f32();
  const float* q = b.f32();
  for (int64_t i = 0, n = a.numel(); i < n; ++i) p[i] += q[i];
}

Tensor concat_rows(const std::vector<Tensor>& parts) {
  AVDIT_CHECK(!parts.empty(), "concat_rows of nothing");
  Shape shape = parts[0].shape();
  int64_t rows = 0;
  for (const auto& t : parts) {
    AVDIT_CHECK(t.dtype() == parts[0].dtype() && t.ndim() == parts[0].ndim(), "concat_rows: mixed tensors");
    for (int i = 1; i < t.ndim(); ++i)
      AVDIT_CHECK(t.size(i) == shape[static_cast<size_t>(i)], "concat_rows: {} vs {}", t.shape_str(),
                  shape_str(shape));
    rows += t.size(0);
  }
  shape[0] = rows;
  Tensor y = Tensor::empty(shape, parts[0].dtype());
  char* dst = static_cast<char*>(y.mutable_raw());
  for (const auto& t : parts) {
    std::memcpy(dst, t.raw(), static_cast<size_t>(t.nbytes()));
    dst += t.nbytes();
  }
  return y;
}

}  // namespace avdit::ops
