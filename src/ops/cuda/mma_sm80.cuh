// The sm_80 tensor-core and copy primitives the mma.sync kernels share (the router's MMAs,
// moe/router.cu; the windowed attention, sm90/windowed_attention_sm90.cu): 16-byte cp.async
// (plain, and zero-filling), its groups, ldmatrix x4 (and transposed), mma.sync m16n8k16 bf16 with
// fp32 accumulation, and bf16 pair packing. Shared-memory operands are 32-bit shared addresses
// (smem_u32). Absent from device passes below sm_80: callers keep their uses inside
// `#if __CUDA_ARCH__ >= 800` in files built for sm_75 too.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
namespace avdit::cuda {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(unsigned smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem));
}

// Writes zeros when !valid (src-size 0; gmem is then not read).
__device__ __forceinline__ void cp_async16_zfill(unsigned smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem),
               "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most kPending committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned smem, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned smem, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem));
}

// d += a (16 x 16 bf16, row) · b (16 x 8 bf16, col), fp32 accumulation.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// (lo, hi) rounded to bf16 in one 32-bit register, lo in the low half (an A-fragment pair).
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}

}  // namespace avdit::cuda
#endif
