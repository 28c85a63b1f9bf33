// ConvTranspose1d on the GPU (ops/conv1d_transpose.h). Per batch row and span of output positions:
// the input samples that reach the span, transposed to [n, Cin], times the weight [Cin, Cout * K]
// in one cuBLASLt GEMM (fp32 accumulation) give every sample's contribution to Cout x K outputs;
// each output then gathers its K / stride contributions in input order, adds the bias in fp32 and
// is rounded once. A span needs no other span's contributions, so no output is accumulated twice.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/context.h"
#include "ops/conv1d_transpose.h"
#include "ops/cuda/common.cuh"
#include "ops/rows.h"

namespace avdit::cuda {
namespace {

// The transposed input and the contributions of one span stay under this.
constexpr int64_t kWorkspaceBytes = int64_t{256} << 20;

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// xt[j, c] = x[c, i0 + j] (the batch row's [Cin, L] from x0), converted to xt's dtype.
__global__ void transpose_kernel(const void* x, Elt xt_, int64_t x0, int64_t L, int64_t i0,
                                 void* xt, Elt tt, int64_t Cin, int64_t total) {
  for (int64_t e = first_of(); e < total; e += stride_of()) {
    const int64_t j = e / Cin, c = e % Cin;
    store_elt(xt, tt, e, load_elt(x, xt_, x0 + c * L + i0 + j));
  }
}

// y[o, t] for t in [t0, t0 + m): the sum over input samples i in [i_lo, i_hi] (increasing, as the
// CPU adds them) with k = t + padding - i * stride in [0, K) of contrib[i - i_lo, o * K + k], plus
// bias[o], rounded once. contrib: F32 [n, Cout * K].
__global__ void gather_kernel(const float* contrib, int64_t Cout, int64_t K, int64_t stride,
                              int64_t padding, int64_t i_lo, int64_t i_hi, const void* bias, Elt bt,
                              void* y, Elt yt, int64_t y0, int64_t Lout, int64_t t0, int64_t m,
                              int64_t total) {
  for (int64_t e = first_of(); e < total; e += stride_of()) {
    const int64_t o = e / m, t = t0 + e % m, q = t + padding;
    // k = q - i * stride < K  <=>  i > (q - K) / stride;  k >= 0  <=>  i <= q / stride.
    int64_t first = q - K + 1;
    first = first <= 0 ? 0 : (first + stride - 1) / stride;
    const int64_t last = q < 0 ? -1 : q / stride;
    float acc = 0.0f;
    for (int64_t i = std::max(first, i_lo); i <= std::min(last, i_hi); ++i)
      acc += contrib[(i - i_lo) * Cout * K + o * K + (q - i * stride)];
    if (bias) acc += load_elt(bias, bt, o);
    store_elt(y, yt, y0 + o * Lout + t, acc);
  }
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void conv1d_transpose(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Conv1dTransposeParams& p, Tensor& y) {
  c.require_here(x, "conv1d_transpose x");
  c.require_here(w, "conv1d_transpose weight");
  c.require_here(y, "conv1d_transpose y");
  if (bias) c.require_here(*bias, "conv1d_transpose bias");
  AVDIT_CHECK(x.ndim() == 3 && w.ndim() == 3, "conv1d_transpose: x {} and weight {} must be 3-D",
              x.shape_str(), w.shape_str());
  const int64_t B = x.size(0), Cin = x.size(1), L = x.size(2);
  const int64_t Cout = w.size(1), K = w.size(2), s = p.stride;
  AVDIT_CHECK(w.size(0) == Cin && s >= 1 && p.padding >= 0,
              "conv1d_transpose: x {} with weight {} (stride {})", x.shape_str(), w.shape_str(), s);
  const int64_t Lout = conv1d_transpose_out_length(L, K, p);
  AVDIT_CHECK(y.ndim() == 3 && y.size(0) == B && y.size(1) == Cout && y.size(2) == Lout,
              "conv1d_transpose: output {} for x {} and weight {}", y.shape_str(), x.shape_str(),
              w.shape_str());
  if (bias)
    AVDIT_CHECK(bias->numel() == Cout, "conv1d_transpose: bias {} for {} channels",
                bias->shape_str(), Cout);
  const Elt xt = elt_of(x, "conv1d_transpose x"), yt = elt_of(y, "conv1d_transpose y");
  elt_of(w, "conv1d_transpose weight");
  const Elt bt = bias ? elt_of(*bias, "conv1d_transpose bias") : Elt::F32;
  if (y.numel() == 0) return;
  AVDIT_REQUIRE(Cin > 0 && K > 0, "conv1d_transpose: weight {} is empty", w.shape_str());

  // cuBLASLt multiplies equal input types: x's when the weight has it, else both in F32 (exact).
  const DType in = x.dtype() == w.dtype() ? x.dtype() : DType::F32;
  const Tensor wk = ops::cast(c, w, in);
  const Elt tt = elt_of(wk, "conv1d_transpose weight");
  const int64_t width = Cout * K, esize = dtype_nbytes(in, 1);
  // A span of m = q * stride outputs reads at most q + ceil(K / stride) + 1 input samples.
  const int64_t reach = (K + s - 1) / s + 2;
  const int64_t per_sample = Cin * esize + width * 4;
  const int64_t q = std::max<int64_t>(1, kWorkspaceBytes / per_sample - reach);
  const int64_t m_span = q * s, n_max = std::min(L, q + reach);
  StreamBuffer xs(c.stream(), static_cast<size_t>(n_max * Cin * esize));
  StreamBuffer contrib(c.stream(), static_cast<size_t>(n_max * width * 4));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t x0 = b * Cin * L, y0 = b * Cout * Lout;
    for (int64_t t0 = 0; t0 < Lout; t0 += m_span) {
      const int64_t m = std::min(m_span, Lout - t0);
      // The samples i whose outputs i * s - padding + [0, K) meet [t0, t0 + m).
      const int64_t i_lo = std::max<int64_t>(0, floor_div(t0 + p.padding - K, s) + 1);
      const int64_t i_hi = std::min(L - 1, floor_div(t0 + m - 1 + p.padding, s));
      const int64_t n = i_hi - i_lo + 1;
      if (n > 0) {
        AVDIT_CHECK(n <= n_max, "conv1d_transpose: span of {} samples above {}", n, n_max);
        transpose_kernel<<<grid_for(n * Cin), kThreads, 0, c.stream()>>>(x.raw(), xt, x0, L, i_lo,
                                                                         xs.p, tt, Cin, n * Cin);
        AVDIT_CUDA_CHECK_LAUNCH();
        // contrib[n, Cout * K] = xs [n, Cin] . w [Cin, Cout * K]
        GemmProblem g;
        g.a = xs.p;
        g.b = wk.raw();
        g.d = contrib.p;
        g.M = n;
        g.N = width;
        g.K = Cin;
        g.lda = Cin;
        g.ldd = width;
        g.in = in;
        g.out = DType::F32;
        g.b_kn = true;
        c.gemm().run(g);
      }
      gather_kernel<<<grid_for(Cout * m), kThreads, 0, c.stream()>>>(
          static_cast<const float*>(contrib.p), Cout, K, s, p.padding, i_lo, i_hi,
          bias ? bias->raw() : nullptr, bt, device_ptr(y), yt, y0, Lout, t0, m, Cout * m);
      AVDIT_CUDA_CHECK_LAUNCH();
    }
  }
}

}  // namespace avdit::ops::cuda
