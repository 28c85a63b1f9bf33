// sgemm_fixed (see gemm_fixed.h). The pool is process-wide because ops take no execution context;
// it is created once, on the first GEMM.
#include "ops/cpu/gemm_fixed.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <mutex>

#include "core/error.h"
#include "core/thread_pool.h"

namespace avdit::ops {

namespace {

// Tiles are a function of (m, n, k) alone. Their count grows with the work, one per ~2^24 FMAs (a
// few ms on one core), as a power of two up to 1024, and their edges stay >= 512 where the matrix
// allows: OpenBLAS packs A and B per call, and on one core 4096^2 x 1024 in 128^2 tiles cost 1.52x
// one call, 256^2 1.19x, 512^2 1.06x, 1024^2 1.02x. Products too small for two such tiles are cut
// into at most 4 tiles with edges >= 64 (the tiny models' GEMMs: ~1.05x), and below 2^22 FMAs a
// product is one call.
constexpr double kFmasPerTile = 1 << 24;
constexpr double kGemmSmall = 1 << 22;
constexpr int64_t kMaxTiles = 1024;
constexpr int64_t kMinEdge = 512, kMinSmallEdge = 64, kSmallTiles = 4;
constexpr int64_t kAlign = 16;  // tile edges on multiples of the micro-kernels' unroll

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int to_int(int64_t v, const char* what) {
  AVDIT_CHECK(v >= 0 && v <= INT_MAX, "sgemm_fixed: {} = {} does not fit the BLAS interface", what,
              v);
  return static_cast<int>(v);
}

// Every OpenBLAS call runs on the calling thread; parallelism comes from the fixed tiles.
void blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

}  // namespace

ThreadPool& cpu_pool() {
  // Never destroyed: worker threads must not be joined during static destruction.
  static ThreadPool* pool = new ThreadPool(default_thread_count());
  return *pool;
}

GemmTiles gemm_tiles(int64_t m, int64_t n, int64_t k) {
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (work < kGemmSmall || m <= 0 || n <= 0)
    return {std::max<int64_t>(m, 1), std::max<int64_t>(n, 1)};
  int64_t wanted = 2;
  while (wanted < kMaxTiles && work / static_cast<double>(wanted * 2) >= kFmasPerTile) wanted *= 2;
  // Halve the taller (relative) side while the halves keep `min_edge`: tiles stay near square,
  // which keeps the total packing of A (once per column of tiles) and B (once per row) small.
  int64_t rows = 1, cols = 1;
  auto split = [&](int64_t target, int64_t min_edge) {
    while (rows * cols < target) {
      const int64_t h = ceil_div(m, rows), w = ceil_div(n, cols);
      if (h >= w && h / 2 >= min_edge) {
        rows *= 2;
      } else if (w / 2 >= min_edge) {
        cols *= 2;
      } else if (h / 2 >= min_edge) {
        rows *= 2;
      } else {
        return;
      }
    }
  };
  split(wanted, kMinEdge);
  if (rows * cols == 1) split(std::min(wanted, kSmallTiles), kMinSmallEdge);
  const int64_t h = ceil_div(ceil_div(m, rows), kAlign) * kAlign;
  const int64_t w = ceil_div(ceil_div(n, cols), kAlign) * kAlign;
  return {std::min(h, m), std::min(w, n)};
}

void sgemm_fixed(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  sgemm_fixed(cpu_pool(), trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void sgemm_fixed(ThreadPool& pool, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  blas_single_threaded();
  to_int(k, "k");
  to_int(lda, "lda");
  to_int(ldb, "ldb");
  to_int(ldc, "ldc");
  const GemmTiles t = gemm_tiles(m, n, k);
  const int64_t row_tiles = (m + t.rows - 1) / t.rows, col_tiles = (n + t.cols - 1) / t.cols;
  pool.run(row_tiles * col_tiles, [&](int64_t tile) {
    const int64_t i0 = tile / col_tiles * t.rows, j0 = tile % col_tiles * t.cols;
    const int64_t rows = std::min(t.rows, m - i0), cols = std::min(t.cols, n - j0);
    const float* bt = trans_b ? b + j0 * ldb : b + j0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, to_int(rows, "m"),
                to_int(cols, "n"), static_cast<int>(k), alpha, a + i0 * lda, static_cast<int>(lda),
                bt, static_cast<int>(ldb), beta, c + i0 * ldc + j0, static_cast<int>(ldc));
  });
}

}  // namespace avdit::ops
