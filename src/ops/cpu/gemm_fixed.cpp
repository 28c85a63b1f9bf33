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

// 128 x 256 tiles: enough tiles for a few threads at the tiny models' shapes, and large enough that
// re-packing A and B per tile costs little (B is packed once per 128 rows of C).
constexpr int64_t kTileRows = 128;
constexpr int64_t kTileCols = 256;
// Below this many FMAs a product is one call: splitting would cost more than it saves.
constexpr int64_t kGemmSmall = int64_t{1} << 20;

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
  if (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) < kGemmSmall)
    return {std::max<int64_t>(m, 1), std::max<int64_t>(n, 1)};
  return {kTileRows, kTileCols};
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
