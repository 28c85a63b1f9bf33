// The CPU oracle's only GEMM: C = alpha A op(B) + beta C in float32, row-major, bit-identical for
// any thread count. C is cut into tiles fixed by (m, n, k) alone; each tile is one single-threaded
// OpenBLAS call, and the tiles are spread over the CPU thread pool (OpenBLAS's own threading splits
// the work by the core count, which changes the bits from machine to machine).
#pragma once

#include <cstdint>

namespace avdit {
class ThreadPool;
}

namespace avdit::ops {

// A [m, k] with row stride lda; B [k, n] (trans_b false, row stride ldb) or [n, k] (trans_b true);
// C [m, n] with row stride ldc.
void sgemm_fixed(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// The same on a given pool (tests compare pools of different sizes in one process).
void sgemm_fixed(ThreadPool& pool, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc);

// The tiles of an m x n x k product: a function of the shape alone, the same for every machine and
// thread count.
struct GemmTiles {
  int64_t rows, cols;  // tile size; a product below kGemmSmall FMAs is one tile
};
GemmTiles gemm_tiles(int64_t m, int64_t n, int64_t k);

// The pool sgemm_fixed runs on: default_thread_count() threads (AVDIT_THREADS,
// OPENBLAS_NUM_THREADS, else the core count), made on first use.
ThreadPool& cpu_pool();

}  // namespace avdit::ops
