// Element-wise ops and gated activations on the CPU (see ops/activation.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/activation.h"
#include "ops/cpu/common.h"

namespace avdit::ops::cpu {
namespace {

// g' = min(g, 7), l' = clamp(l, -7, 7): g' sigmoid(1.702 g') (l' + 1) (GPT-OSS style, +1 on the
// linear part).
inline float swiglu7(float g, float l) {
  const float gc = std::min(g, kSwiglu7Limit);
  const float lc = std::clamp(l, -kSwiglu7Limit, kSwiglu7Limit);
  const float sig = 1.0f / (1.0f + std::exp(-(kSwiglu7Alpha * gc)));
  return gc * sig * (lc + 1.0f);
}

}  // namespace

void unary(Unary op, const Tensor& x_in, Tensor& y) {
  AVDIT_CHECK(y.numel() == x_in.numel(), "unary op: output {} for {}", y.shape_str(),
              x_in.shape_str());
  const Tensor x = f32(x_in);
  std::vector<float> out(static_cast<size_t>(x.numel()));
  const float* p = x.f32();
  for (int64_t i = 0; i < x.numel(); ++i)
    out[i] = op == Unary::Silu ? p[i] / (1.f + std::exp(-p[i])) : 1.f / (1.f + std::exp(-p[i]));
  store(y, out.data());
}

void binary(Binary op, const Tensor& a_in, const Tensor& b_in, Tensor& y) {
  AVDIT_CHECK(a_in.numel() == b_in.numel() && y.numel() == a_in.numel(),
              "element-wise op on {} and {} into {}", a_in.shape_str(), b_in.shape_str(),
              y.shape_str());
  const Tensor a = f32(a_in), b = f32(b_in);
  std::vector<float> out(static_cast<size_t>(a.numel()));
  const float *p = a.f32(), *q = b.f32();
  for (int64_t i = 0; i < a.numel(); ++i)
    out[i] = op == Binary::Add ? p[i] + q[i] : op == Binary::Sub ? p[i] - q[i] : p[i] * q[i];
  store(y, out.data());
}

void gated(Gated kind, const Tensor& u_in, const Tensor* l_in, Tensor& y, int64_t col) {
  const Tensor u = f32(u_in);
  const DType ut = u_in.dtype();  // the silu is rounded where u is stored (bf16: the reference)
  const int64_t width = kind == Gated::Swiglu7Split ? u.size(-1) : u.size(-1) / 2;
  AVDIT_CHECK(kind == Gated::Swiglu7Split || u.size(-1) % 2 == 0,
              "gated activation on an odd width {}", u.size(-1));
  const int64_t rows = width ? u.numel() / (kind == Gated::Swiglu7Split ? width : 2 * width) : 0;
  Tensor l;
  if (kind == Gated::Swiglu7Split) {
    AVDIT_CHECK(l_in && l_in->shape() == u_in.shape(),
                "swiglu7_split: gate {} and linear {} differ", u.shape_str(),
                l_in ? l_in->shape_str() : std::string("none"));
    l = f32(*l_in);
  }
  // Into columns [col, col + width) of a 2-D y [rows, ld], or a y of the result's own shape.
  const bool into = col != 0 || (y.ndim() == 2 && y.size(1) != width);
  const int64_t ld = into ? y.size(1) : width;
  AVDIT_CHECK(y.numel() == rows * ld && col + width <= ld,
              "gated activation: output {} for {} rows of {} at column {}", y.shape_str(), rows,
              width, col);
  const DType yt = y.dtype();
  std::vector<float> out(static_cast<size_t>(rows * width));
  const float* s = u.f32();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < width; ++i) {
      float v;
      switch (kind) {
        case Gated::Swiglu: {
          const float g = s[r * 2 * width + i], up = s[r * 2 * width + width + i];
          v = round_to(yt, round_to(ut, g / (1.0f + std::exp(-g))) * up);
          break;
        }
        case Gated::Swiglu7Interleaved:
          v = swiglu7(s[r * 2 * width + 2 * i], s[r * 2 * width + 2 * i + 1]);
          break;
        default: v = swiglu7(s[r * width + i], l.f32()[r * width + i]); break;
      }
      out[r * width + i] = v;
    }
  if (!into) {
    store(y, out.data());
    return;
  }
  char* base = static_cast<char*>(y.mutable_raw());
  for (int64_t r = 0; r < rows; ++r)
    convert(out.data() + r * width, DType::F32, base + dtype_nbytes(yt, r * ld + col), yt, width);
}

}  // namespace avdit::ops::cpu
