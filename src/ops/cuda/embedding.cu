// The MAGI-2 tables and embedder epilogue on the GPU (see ops/embedding.h): one thread per output
// element, the CPU reference's float32 operation order with explicitly rounded multiplies and
// divides.
#include <cmath>

#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/embedding.h"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::device_ptr;
using ::avdit::cuda::Elt;
using ::avdit::cuda::elt_of;
using ::avdit::cuda::first_of;
using ::avdit::cuda::grid_for;
using ::avdit::cuda::kThreads;
using ::avdit::cuda::store_elt;
using ::avdit::cuda::stride_of;

__global__ void embed_epilogue_kernel(const float* y, const float* bias, const int* group,
                                      const float* time, const int* perm, int64_t L, int64_t R,
                                      int64_t tc, void* s, Elt st) {
  const int64_t n = L * R;
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t r = i / R, c = i % R;
    const float v = c < tc ? time[static_cast<int64_t>(perm[r]) * tc + c]
                           : __fadd_rn(y[i], bias[static_cast<int64_t>(group[r]) * R + c]);
    store_elt(s, st, i, v);
  }
}

__global__ void time_embedding_kernel(const float* t, const float* freqs, int64_t L, int64_t dim,
                                      float* out) {
  const int64_t n = L * dim, half = dim / 2;
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t l = i / dim, c = i % dim;
    float v = 0.f;
    if (dim == 1) {
      v = t[l];
    } else if (c < 2 * half) {
      const float a = __fmul_rn(__fmul_rn(t[l], 1000.0f), freqs[c < half ? c : c - half]);
      v = c < half ? cosf(a) : sinf(a);
    }  // odd dim: the last column stays 0
    out[i] = v;
  }
}

__global__ void rope_table_kernel(const float* coords, const float* bands, int64_t L, int64_t B,
                                  float* out) {
  const int64_t n = L * 3 * B;
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t l = i / (3 * B), ab = i % (3 * B), a = ab / B, b = ab % B;
    const float* r = coords + l * 9;
    const float size = r[3 + a], ref = r[6 + a];
    // 0/0 is 1 for singleton axes; another non-finite scale shows as NaN (the CPU refuses it).
    const float scale = (ref == 1.0f && size == 1.0f) ? 1.0f : __fdiv_rn(ref - 1.0f, size - 1.0f);
    const float centre = a == 0 ? 0.0f : __fdiv_rn(size - 1.0f, 2.0f);
    const float proj = __fmul_rn(__fmul_rn(r[a] - centre, scale), bands[b]);
    out[l * 6 * B + a * B + b] = sinf(proj);
    out[l * 6 * B + 3 * B + a * B + b] = cosf(proj);
  }
}

void check_f32(CudaContext& c, const Tensor& t, const char* what) {
  c.require_here(t, what);
  AVDIT_CHECK(t.dtype() == DType::F32, "{}: expected F32, got {} {}", what, dtype_name(t.dtype()),
              t.shape_str());
}

}  // namespace

void embed_epilogue(CudaContext& c, const Tensor& y, const Tensor& bias, const Tensor& group,
                    const Tensor* time, const Tensor& perm, Tensor& s) {
  check_f32(c, y, "embed_epilogue y");
  check_f32(c, bias, "embed_epilogue bias");
  ::avdit::cuda::require_i32(group, "embed_epilogue group");
  ::avdit::cuda::require_i32(perm, "embed_epilogue perm");
  c.require_here(s, "embed_epilogue s");
  AVDIT_CHECK(y.ndim() == 2 && s.numel() == y.numel(), "embed_epilogue: y {} s {}", y.shape_str(),
              s.shape_str());
  const int64_t L = y.size(0), R = y.size(1);
  AVDIT_CHECK(bias.numel() == 3 * R && group.numel() == L && perm.numel() == L,
              "embed_epilogue: bias {} group {} perm {} for [{}, {}]", bias.shape_str(),
              group.shape_str(), perm.shape_str(), L, R);
  const int64_t tc = time ? time->size(-1) : 0;
  if (time) {
    check_f32(c, *time, "embed_epilogue time");
    AVDIT_CHECK(tc <= R && time->numel() == L * tc, "embed_epilogue: time {} for [{}, {}]",
                time->shape_str(), L, R);
  }
  if (L * R == 0) return;
  embed_epilogue_kernel<<<grid_for(L * R), kThreads, 0, c.stream()>>>(
      static_cast<const float*>(y.raw()), static_cast<const float*>(bias.raw()),
      group.data<int32_t>(), time ? static_cast<const float*>(time->raw()) : nullptr,
      perm.data<int32_t>(), L, R, tc, device_ptr(s), elt_of(s, "embed_epilogue s"));
  AVDIT_CUDA_CHECK_LAUNCH();
}

void time_embedding(CudaContext& c, const Tensor& t, const Tensor& freqs, Tensor& out) {
  check_f32(c, t, "time_embedding t");
  check_f32(c, out, "time_embedding out");
  const int64_t L = t.numel(), dim = out.ndim() == 2 ? out.size(1) : 0;
  AVDIT_CHECK(out.numel() == L * dim, "time_embedding: out {} for {} times", out.shape_str(), L);
  AVDIT_CHECK(dim <= 1 || freqs.numel() == dim / 2, "time_embedding: {} frequencies for dim {}",
              freqs.numel(), dim);
  if (L * dim == 0) return;
  if (dim > 1) check_f32(c, freqs, "time_embedding freqs");
  time_embedding_kernel<<<grid_for(L * dim), kThreads, 0, c.stream()>>>(
      static_cast<const float*>(t.raw()),
      dim > 1 ? static_cast<const float*>(freqs.raw()) : nullptr, L, dim,
      static_cast<float*>(device_ptr(out)));
  AVDIT_CUDA_CHECK_LAUNCH();
}

void rope_table(CudaContext& c, const Tensor& coords, const Tensor& bands, Tensor& out) {
  check_f32(c, coords, "rope_table coords");
  check_f32(c, bands, "rope_table bands");
  check_f32(c, out, "rope_table out");
  AVDIT_REQUIRE(coords.ndim() == 2 && coords.size(1) == 9,
                "coords_mapping has shape {}, expected [L, 9]", coords.shape_str());
  const int64_t L = coords.size(0), B = bands.numel();
  AVDIT_CHECK(out.numel() == L * 6 * B, "rope_table: out {} for [{}, {}]", out.shape_str(), L,
              6 * B);
  if (L * B == 0) return;
  rope_table_kernel<<<grid_for(L * 3 * B), kThreads, 0, c.stream()>>>(
      static_cast<const float*>(coords.raw()), static_cast<const float*>(bands.raw()), L, B,
      static_cast<float*>(device_ptr(out)));
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
