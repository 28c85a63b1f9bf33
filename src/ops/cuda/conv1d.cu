// Conv1d on the GPU (ops/conv1d.h), as the CPU does it: per batch row and group, a span of output
// positions is unfolded (im2col, [Cin/groups * K, span] in a bounded stream-ordered workspace) and
// multiplied by the weight [Cout/groups, Cin/groups * K] in one cuBLASLt GEMM (fp32 accumulation);
// the bias is added in fp32 and the sum rounded once to y's dtype.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/context.h"
#include "ops/conv1d.h"
#include "ops/cuda/common.cuh"
#include "ops/rows.h"

namespace avdit::cuda {
namespace {

// The unfolded span and the span's fp32 GEMM output stay under this.
constexpr int64_t kWorkspaceBytes = int64_t{256} << 20;
constexpr int64_t kMinSpan = 64;

// cols[c * K + k, j] = x[c, (t0 + j) * stride - padding + k * dilation] (0 outside), x the group's
// [Cg, L] rows, converted to cols' dtype.
__global__ void unfold_kernel(const void* x, Elt xt, int64_t x0, int64_t L, void* cols, Elt ct,
                              int64_t K, int64_t t0, int64_t n, int64_t stride, int64_t padding,
                              int64_t dilation, int64_t total) {
  for (int64_t e = first_of(); e < total; e += stride_of()) {
    const int64_t row = e / n, j = e % n, c = row / K, k = row % K;
    const int64_t s = (t0 + j) * stride - padding + k * dilation;
    store_elt(cols, ct, e, s >= 0 && s < L ? load_elt(x, xt, x0 + c * L + s) : 0.0f);
  }
}

// y[y0 + o * ldy + j] = acc[o * lda + j] + bias[b0 + o], rounded once to y's dtype (acc and y may
// be the same F32 memory: each element is read and then written by one thread).
__global__ void bias_rows_kernel(const float* acc, int64_t lda, const void* bias, Elt bt,
                                 int64_t b0, void* y, Elt yt, int64_t y0, int64_t ldy, int64_t n,
                                 int64_t total) {
  for (int64_t e = first_of(); e < total; e += stride_of()) {
    const int64_t o = e / n, j = e % n;
    float v = acc[o * lda + j];
    if (bias) v += load_elt(bias, bt, b0 + o);
    store_elt(y, yt, y0 + o * ldy + j, v);
  }
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void conv1d(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
            const Conv1dParams& p, Tensor& y) {
  c.require_here(x, "conv1d x");
  c.require_here(w, "conv1d weight");
  c.require_here(y, "conv1d y");
  if (bias) c.require_here(*bias, "conv1d bias");
  AVDIT_CHECK(x.ndim() == 3 && w.ndim() == 3, "conv1d: x {} and weight {} must be 3-D",
              x.shape_str(), w.shape_str());
  const int64_t B = x.size(0), Cin = x.size(1), L = x.size(2);
  const int64_t Cout = w.size(0), Cg = w.size(1), K = w.size(2), G = p.groups;
  AVDIT_CHECK(G >= 1 && Cg * G == Cin && Cout % G == 0, "conv1d: x {} with weight {} in {} groups",
              x.shape_str(), w.shape_str(), G);
  AVDIT_CHECK(p.stride >= 1 && p.dilation >= 1 && p.padding >= 0,
              "conv1d: stride {} dilation {} padding {}", p.stride, p.dilation, p.padding);
  const int64_t Lout = conv1d_out_length(L, K, p);
  AVDIT_CHECK(y.ndim() == 3 && y.size(0) == B && y.size(1) == Cout && y.size(2) == Lout,
              "conv1d: output {} for x {} and weight {}", y.shape_str(), x.shape_str(),
              w.shape_str());
  if (bias)
    AVDIT_CHECK(bias->numel() == Cout, "conv1d: bias {} for {} channels", bias->shape_str(), Cout);
  const Elt xt = elt_of(x, "conv1d x"), yt = elt_of(y, "conv1d y");
  elt_of(w, "conv1d weight");
  const Elt bt = bias ? elt_of(*bias, "conv1d bias") : Elt::F32;
  if (y.numel() == 0) return;
  AVDIT_REQUIRE(Cg * K > 0, "conv1d: weight {} has no taps", w.shape_str());

  // cuBLASLt multiplies equal input types: x's when the weight has it, else both in F32 (exact).
  const DType in = x.dtype() == w.dtype() ? x.dtype() : DType::F32;
  const Tensor wk = ops::cast(c, w, in);
  const Elt ct = elt_of(wk, "conv1d weight");
  const int64_t Og = Cout / G, rows = Cg * K, esize = dtype_nbytes(in, 1);
  // An F32 y takes the GEMM's output directly (the bias added in place); any other dtype goes
  // through an fp32 span so that the bias is added before the one rounding.
  const bool direct = y.dtype() == DType::F32;
  const int64_t per_pos = rows * esize + (direct ? 0 : Og * 4);
  const int64_t span = std::min(Lout, std::max(kMinSpan, kWorkspaceBytes / per_pos));
  StreamBuffer cols(c.stream(), static_cast<size_t>(rows * span * esize));
  StreamBuffer acc(c.stream(), static_cast<size_t>(direct ? 0 : Og * span * 4));
  float* py = direct ? static_cast<float*>(device_ptr(y)) : nullptr;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t x0 = (b * Cin + g * Cg) * L, y0 = (b * Cout + g * Og) * Lout;
      for (int64_t t0 = 0; t0 < Lout; t0 += span) {
        const int64_t n = std::min(span, Lout - t0);
        unfold_kernel<<<grid_for(rows * n), kThreads, 0, c.stream()>>>(
            x.raw(), xt, x0, L, cols.p, ct, K, t0, n, p.stride, p.padding, p.dilation, rows * n);
        AVDIT_CUDA_CHECK_LAUNCH();
        // D[Og, n] = W_g [Og, rows] . cols [rows, n]
        GemmProblem q;
        q.a = static_cast<const char*>(wk.raw()) + g * Og * rows * esize;
        q.b = cols.p;
        q.d = direct ? static_cast<void*>(py + y0 + t0) : acc.p;
        q.M = Og;
        q.N = n;
        q.K = rows;
        q.lda = rows;
        q.ldd = direct ? Lout : n;
        q.in = in;
        q.out = DType::F32;
        q.b_kn = true;
        c.gemm().run(q);
        if (direct && !bias) continue;
        bias_rows_kernel<<<grid_for(Og * n), kThreads, 0, c.stream()>>>(
            direct ? py + y0 + t0 : static_cast<const float*>(acc.p), direct ? Lout : n,
            bias ? bias->raw() : nullptr, bt, g * Og, device_ptr(y), yt, y0 + t0, Lout, n, Og * n);
        AVDIT_CUDA_CHECK_LAUNCH();
      }
    }
}

}  // namespace avdit::ops::cuda
