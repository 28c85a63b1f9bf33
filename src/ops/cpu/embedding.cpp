// The MAGI-2 tables and embedder epilogue on the CPU (see ops/embedding.h): the reference's float32
// operation order, so that the tables match it to the last ulp where libm allows.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "ops/cpu/common.h"
#include "ops/embedding.h"

namespace avdit::ops {

Tensor time_frequencies(int64_t dim) {
  const int64_t half = dim / 2;
  Tensor f = Tensor::empty({half}, DType::F32);
  // torch: exp(-math.log(10000) * arange(half, f32) / half), each step rounded to float32.
  const float neg_log = static_cast<float>(-std::log(10000.0));
  for (int64_t k = 0; k < half; ++k)
    f.f32()[k] = std::exp((neg_log * static_cast<float>(k)) / static_cast<float>(half));
  return f;
}

namespace cpu {

void embed_epilogue(const Tensor& y_in, const Tensor& bias_in, const Tensor& group,
                    const Tensor* time_in, const Tensor& perm, Tensor& s) {
  AVDIT_CHECK(y_in.ndim() == 2 && s.numel() == y_in.numel(), "embed_epilogue: y {} s {}",
              y_in.shape_str(), s.shape_str());
  const int64_t L = y_in.size(0), R = y_in.size(1);
  AVDIT_CHECK(bias_in.numel() == 3 * R && group.numel() == L && perm.numel() == L,
              "embed_epilogue: bias {} group {} perm {} for [{}, {}]", bias_in.shape_str(),
              group.shape_str(), perm.shape_str(), L, R);
  const int64_t tc = time_in ? time_in->size(-1) : 0;
  AVDIT_CHECK(tc <= R && (!time_in || time_in->numel() == L * tc),
              "embed_epilogue: time {} for [{}, {}]",
              time_in ? time_in->shape_str() : std::string("none"), L, R);
  const Tensor y = f32(y_in), bias = f32(bias_in);
  Tensor time;
  if (time_in) time = f32(*time_in);
  std::vector<float> out(static_cast<size_t>(L * R));
  for (int64_t r = 0; r < L; ++r) {
    const float* b = std::as_const(bias).f32() + index_at(group, r) * R;
    const float* yr = y.f32() + r * R;
    float* o = out.data() + r * R;
    for (int64_t c = 0; c < R; ++c) o[c] = yr[c] + b[c];
    if (tc > 0) std::copy_n(std::as_const(time).f32() + index_at(perm, r) * tc, tc, o);
  }
  store(s, out.data());
}

void time_embedding(const Tensor& t_in, const Tensor& freqs_in, Tensor& out) {
  const int64_t L = t_in.numel(), dim = out.ndim() == 2 ? out.size(1) : 0, half = dim / 2;
  AVDIT_CHECK(out.numel() == L * dim && out.dtype() == DType::F32,
              "time_embedding: out {} for {} times", out.shape_str(), L);
  AVDIT_CHECK(dim == 1 || freqs_in.numel() == half, "time_embedding: {} frequencies for dim {}",
              freqs_in.numel(), dim);
  const Tensor t = f32(t_in);
  const float* tv = t.f32();
  float* o = out.f32();
  if (dim == 1) {
    for (int64_t l = 0; l < L; ++l) o[l] = tv[l];
    return;
  }
  const Tensor fr = f32(freqs_in);
  const float* f = std::as_const(fr).f32();
  for (int64_t l = 0; l < L; ++l) {
    const float pos = tv[l] * 1000.0f;
    float* row = o + l * dim;
    for (int64_t k = 0; k < half; ++k) {
      const float a = pos * f[k];
      row[k] = std::cos(a);
      row[half + k] = std::sin(a);
    }
    if (dim % 2) row[dim - 1] = 0.f;
  }
}

void rope_table(const Tensor& coords_in, const Tensor& bands_in, Tensor& out) {
  AVDIT_REQUIRE(coords_in.ndim() == 2 && coords_in.size(1) == 9,
                "coords_mapping has shape {}, expected [L, 9]", coords_in.shape_str());
  const int64_t L = coords_in.size(0), B = bands_in.numel();
  AVDIT_CHECK(out.numel() == L * 6 * B && out.dtype() == DType::F32,
              "rope_table: out {} for [{}, {}]", out.shape_str(), L, 6 * B);
  const Tensor coords = f32(coords_in), bands = f32(bands_in);
  const float* c = coords.f32();
  const float* bw = std::as_const(bands).f32();
  float* o = out.f32();
  for (int64_t l = 0; l < L; ++l) {
    const float* r = c + l * 9;
    float* row = o + l * 6 * B;
    for (int a = 0; a < 3; ++a) {
      const float size = r[3 + a], ref = r[6 + a];
      float scale;
      if (ref == 1.0f && size == 1.0f) {
        scale = 1.0f;  // the reference fixes 0/0 to 1 for singleton axes
      } else {
        scale = (ref - 1.0f) / (size - 1.0f);
        AVDIT_REQUIRE(
            std::isfinite(scale),
            "coords_mapping row {}: axis {} has size {} and reference {} (scale not finite)", l, a,
            size, ref);
      }
      const float center = a == 0 ? 0.0f : (size - 1.0f) / 2.0f;  // time is not centred
      const float x = (r[a] - center) * scale;
      for (int64_t b = 0; b < B; ++b) {
        const float proj = x * bw[b];
        row[a * B + b] = std::sin(proj);
        row[3 * B + a * B + b] = std::cos(proj);
      }
    }
  }
}

}  // namespace cpu
}  // namespace avdit::ops
