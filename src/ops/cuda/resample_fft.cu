// FFT resampling on the GPU (ops/resample_fft.h), the CPU's algorithm in float64 on the device:
// a complex DFT of each row (radix-2 for powers of two, Bluestein's chirp-z through a power of two
// otherwise, as ops/cpu/fft.cpp), the spectrum truncated or padded with scipy's Nyquist rule, the
// inverse DFT, scaled by 1 / n. Our own kernels rather than cuFFT, which the build does not link:
// one launch per radix-2 stage, each a plain butterfly pass over every row.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/resample_fft.h"

namespace avdit::cuda {
namespace {

__device__ __forceinline__ double2 cmul(double2 a, double2 b) {
  return make_double2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

int log2_of(int64_t n) {
  int b = 0;
  while ((int64_t{1} << b) < n) ++b;
  return b;
}

// w[k] = exp(sign 2 pi i k / N), k < N / 2.
__global__ void twiddle_kernel(double2* w, int64_t N, double sign) {
  for (int64_t k = first_of(); k < N / 2; k += stride_of()) {
    double s, c;
    sincospi(sign * 2.0 * static_cast<double>(k) / static_cast<double>(N), &s, &c);
    w[k] = make_double2(c, s);
  }
}

// Each row's element i swapped with element bitreverse(i) (bits = log2 N >= 1).
__global__ void bit_reverse_kernel(double2* a, int64_t total, int bits) {
  const int64_t mask = (int64_t{1} << bits) - 1;
  for (int64_t e = first_of(); e < total; e += stride_of()) {
    const int64_t i = e & mask;
    const int64_t j =
        static_cast<int64_t>(__brevll(static_cast<unsigned long long>(i)) >> (64 - bits));
    if (i < j) {
      double2* row = a + (e - i);
      const double2 t = row[i];
      row[i] = row[j];
      row[j] = t;
    }
  }
}

// One radix-2 stage (butterflies of span 2 * half) on every row of N = 2^bits elements.
__global__ void butterfly_kernel(double2* a, const double2* w, int64_t total, int bits, int hbits) {
  const int64_t half = int64_t{1} << hbits, pairs_mask = (int64_t{1} << (bits - 1)) - 1;
  for (int64_t e = first_of(); e < total; e += stride_of()) {
    const int64_t r = e >> (bits - 1), b = e & pairs_mask, k = b & (half - 1);
    double2* row = a + (r << bits) + ((b >> hbits) << (hbits + 1)) + k;
    const double2 u = row[0], v = cmul(row[half], w[k << (bits - 1 - hbits)]);
    row[0] = make_double2(u.x + v.x, u.y + v.y);
    row[half] = make_double2(u.x - v.x, u.y - v.y);
  }
}

// In place on rows x N (N a power of two): X[k] = sum_t a[t] exp(-+2 pi i k t / N), unscaled.
void radix2(cudaStream_t st, double2* a, int64_t rows, int64_t N, bool inverse) {
  if (N <= 1) return;
  const int bits = log2_of(N);
  StreamBuffer w(st, static_cast<size_t>(N / 2) * sizeof(double2));
  twiddle_kernel<<<grid_for(N / 2), kThreads, 0, st>>>(static_cast<double2*>(w.p), N,
                                                       inverse ? 1.0 : -1.0);
  bit_reverse_kernel<<<grid_for(rows * N), kThreads, 0, st>>>(a, rows * N, bits);
  for (int hbits = 0; hbits < bits; ++hbits)
    butterfly_kernel<<<grid_for(rows * N / 2), kThreads, 0, st>>>(
        a, static_cast<const double2*>(w.p), rows * N / 2, bits, hbits);
  AVDIT_CUDA_CHECK_LAUNCH();
}

// chirp[t] = exp(sign pi i (t^2 mod 2N) / N) (the reduction keeps the angle small and exact).
__global__ void chirp_kernel(double2* chirp, int64_t N, double sign) {
  for (int64_t t = first_of(); t < N; t += stride_of()) {
    const uint64_t sq =
        (static_cast<uint64_t>(t) * static_cast<uint64_t>(t)) % (2 * static_cast<uint64_t>(N));
    double s, c;
    sincospi(sign * static_cast<double>(sq) / static_cast<double>(N), &s, &c);
    chirp[t] = make_double2(c, s);
  }
}

// p[r, t] = a[r, t] chirp[t] for t < N, zero up to M.
__global__ void chirp_in_kernel(const double2* a, const double2* chirp, double2* p, int64_t N,
                                int64_t M, int64_t total) {
  for (int64_t e = first_of(); e < total; e += stride_of()) {
    const int64_t r = e / M, t = e % M;
    p[e] = t < N ? cmul(a[r * N + t], chirp[t]) : make_double2(0.0, 0.0);
  }
}

// q[i] = conj(chirp[|i|]) for i in (-N, N) taken mod M, zero elsewhere.
__global__ void chirp_filter_kernel(const double2* chirp, double2* q, int64_t N, int64_t M) {
  for (int64_t i = first_of(); i < M; i += stride_of()) {
    const int64_t t = i < N ? i : (i > M - N ? M - i : -1);
    q[i] = t < 0 ? make_double2(0.0, 0.0) : make_double2(chirp[t].x, -chirp[t].y);
  }
}

__global__ void mul_rows_kernel(double2* p, const double2* q, int64_t M, int64_t total) {
  for (int64_t e = first_of(); e < total; e += stride_of()) p[e] = cmul(p[e], q[e % M]);
}

// a[r, k] = p[r, k] chirp[k] / M for k < N.
__global__ void chirp_out_kernel(const double2* p, const double2* chirp, double2* a, int64_t N,
                                 int64_t M, int64_t total) {
  const double inv = 1.0 / static_cast<double>(M);
  for (int64_t e = first_of(); e < total; e += stride_of()) {
    const int64_t r = e / N, k = e % N;
    const double2 v = cmul(p[r * M + k], chirp[k]);
    a[e] = make_double2(v.x * inv, v.y * inv);
  }
}

// In place on rows x N, any N: the DFT as ops/cpu/fft.h defines it.
void dft_rows(cudaStream_t st, double2* a, int64_t rows, int64_t N, bool inverse) {
  if (N <= 1) return;
  if ((N & (N - 1)) == 0) return radix2(st, a, rows, N, inverse);
  int64_t M = 1;
  while (M < 2 * N - 1) M <<= 1;
  const double sign = inverse ? 1.0 : -1.0;
  StreamBuffer chirp(st, static_cast<size_t>(N) * sizeof(double2));
  StreamBuffer p(st, static_cast<size_t>(rows * M) * sizeof(double2));
  StreamBuffer q(st, static_cast<size_t>(M) * sizeof(double2));
  auto* ch = static_cast<double2*>(chirp.p);
  auto* pp = static_cast<double2*>(p.p);
  auto* qq = static_cast<double2*>(q.p);
  chirp_kernel<<<grid_for(N), kThreads, 0, st>>>(ch, N, sign);
  chirp_in_kernel<<<grid_for(rows * M), kThreads, 0, st>>>(a, ch, pp, N, M, rows * M);
  chirp_filter_kernel<<<grid_for(M), kThreads, 0, st>>>(ch, qq, N, M);
  AVDIT_CUDA_CHECK_LAUNCH();
  radix2(st, pp, rows, M, false);
  radix2(st, qq, 1, M, false);
  mul_rows_kernel<<<grid_for(rows * M), kThreads, 0, st>>>(pp, qq, M, rows * M);
  radix2(st, pp, rows, M, true);
  chirp_out_kernel<<<grid_for(rows * N), kThreads, 0, st>>>(pp, ch, a, N, M, rows * N);
  AVDIT_CUDA_CHECK_LAUNCH();
}

__global__ void load_rows_kernel(const void* x, Elt xt, double2* a, int64_t total) {
  for (int64_t e = first_of(); e < total; e += stride_of())
    a[e] = make_double2(static_cast<double>(load_elt(x, xt, e)), 0.0);
}

// z[r, k], the full spectrum of the real output of length m, from the n-point spectrum a: bins
// both lengths share, the shared Nyquist bin x2 (shrinking) or x0.5 (growing) as scipy does, the
// imaginary parts of bin 0 and of bin m/2 (m even) dropped as irfft does, Hermitian above m/2.
__global__ void spectrum_kernel(const double2* a, int64_t n, double2* z, int64_t m, int64_t total) {
  const int64_t shared = n < m ? n : m, nyq = shared / 2 + 1;
  for (int64_t e = first_of(); e < total; e += stride_of()) {
    const int64_t r = e / m, k = e % m;
    const bool upper = k > m / 2;
    const int64_t kk = upper ? m - k : k;
    double2 v = kk < nyq ? a[r * n + kk] : make_double2(0.0, 0.0);
    if (shared % 2 == 0 && m != n && kk == shared / 2) {
      const double f = m < n ? 2.0 : 0.5;
      v = make_double2(v.x * f, v.y * f);
    }
    if (kk == 0 || (m % 2 == 0 && kk == m / 2)) v.y = 0.0;
    if (upper) v.y = -v.y;
    z[e] = v;
  }
}

// y[r, t] = Re z[r, t] / n (irfft's 1 / m times scipy's m / n), rounded to float, then to y's
// dtype, as the CPU does.
__global__ void store_rows_kernel(const double2* z, double n, void* y, Elt yt, int64_t total) {
  for (int64_t e = first_of(); e < total; e += stride_of())
    store_elt(y, yt, e, static_cast<float>(z[e].x / n));
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void resample_fft(CudaContext& c, const Tensor& x, Tensor& y) {
  c.require_here(x, "resample_fft x");
  c.require_here(y, "resample_fft y");
  AVDIT_CHECK(x.ndim() == 2 && y.ndim() == 2 && y.size(0) == x.size(0),
              "resample_fft: output {} for {}", y.shape_str(), x.shape_str());
  const Elt xt = elt_of(x, "resample_fft x"), yt = elt_of(y, "resample_fft y");
  const int64_t rows = x.size(0), n = x.size(1), m = y.size(1);
  if (rows == 0 || m == 0) return;
  AVDIT_CHECK(n >= 1, "resample_fft: x {} has no samples", x.shape_str());
  const cudaStream_t st = c.stream();
  StreamBuffer a(st, static_cast<size_t>(rows * n) * sizeof(double2));
  StreamBuffer z(st, static_cast<size_t>(rows * m) * sizeof(double2));
  auto* pa = static_cast<double2*>(a.p);
  auto* pz = static_cast<double2*>(z.p);
  load_rows_kernel<<<grid_for(rows * n), kThreads, 0, st>>>(x.raw(), xt, pa, rows * n);
  AVDIT_CUDA_CHECK_LAUNCH();
  dft_rows(st, pa, rows, n, false);
  spectrum_kernel<<<grid_for(rows * m), kThreads, 0, st>>>(pa, n, pz, m, rows * m);
  AVDIT_CUDA_CHECK_LAUNCH();
  dft_rows(st, pz, rows, m, true);
  store_rows_kernel<<<grid_for(rows * m), kThreads, 0, st>>>(pz, static_cast<double>(n),
                                                             device_ptr(y), yt, rows * m);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
