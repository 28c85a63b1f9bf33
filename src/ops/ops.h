// TEMPORARY (removed once the MAGI-2 forward is on the op set): the old host-only op signatures,
// forwarding to the CPU implementations of the op set.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/linear.h"
#include "ops/norm.h"
#include "ops/rows.h"

namespace avdit::ops {

inline Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias = nullptr) {
  Shape shape = x.shape();
  shape.back() = w.size(0);
  Tensor y = Tensor::empty(shape, DType::F32);
  cpu::linear(x, w, bias, nullptr, y);
  return y;
}
inline Tensor matmul(const Tensor& a, const Tensor& b) {
  Tensor c = Tensor::empty({a.size(0), b.size(1)}, DType::F32);
  cpu::matmul(a, b, c);
  return c;
}
inline Tensor rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_weight = false) {
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  cpu::rms_norm(x, RmsNormWeight{w, one_plus_weight, nullptr}, eps, y);
  return y;
}
inline Tensor silu(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  cpu::unary(Unary::Silu, x, y);
  return y;
}
inline Tensor sigmoid(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  cpu::unary(Unary::Sigmoid, x, y);
  return y;
}
inline Tensor add(const Tensor& a, const Tensor& b) {
  Tensor y = Tensor::empty(a.shape(), DType::F32);
  cpu::binary(Binary::Add, a, b, y);
  return y;
}
inline Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor y = Tensor::empty(a.shape(), DType::F32);
  cpu::binary(Binary::Mul, a, b, y);
  return y;
}
inline void add_(Tensor& a, const Tensor& b) { cpu::binary(Binary::Add, a, b, a); }
inline Tensor concat_rows(const std::vector<Tensor>& parts) {
  CpuContext c;
  return concat_rows(c, parts);
}
inline Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                        const std::vector<int64_t>& cu_seqlens = {}, const Tensor* sinks = nullptr) {
  Segments s;
  s.cu = cu_seqlens.empty() ? std::vector<int64_t>{0, q.size(0)} : cu_seqlens;
  Tensor y = Tensor::empty(q.shape(), DType::F32);
  cpu::attention(q, k, v, scale, s, sinks, nullptr, y);
  return y;
}
inline void rope_rotate_half_(Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t s = x.size(0), h = x.size(1), d = x.size(2), half = cos.size(-1);
  float* p = x.f32();
  const float *pc = cos.f32(), *ps = sin.f32();
  for (int64_t t = 0; t < s; ++t)
    for (int64_t hh = 0; hh < h; ++hh) {
      float* a = p + (t * h + hh) * d;
      for (int64_t i = 0; i < half; ++i) {
        const float c = pc[t * half + i], sn = ps[t * half + i];
        const float x0 = a[i], x1 = a[i + half];
        a[i] = x0 * c - x1 * sn;
        a[i + half] = x1 * c + x0 * sn;
      }
    }
}

}  // namespace avdit::ops
