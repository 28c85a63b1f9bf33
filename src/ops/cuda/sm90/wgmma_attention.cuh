// The wgmma pieces of our FlashAttention-3-style kernels (windowed_attention_sm90.cu and the FP8
// attention_fp8_sm90.cu; the studies in dev/cuda): m64n128k16 bf16 and m64n128k32 e4m3 products with
// fp32 accumulators, S = Q K^T with both operands in shared memory and O += P V with P from
// registers, the shared-memory descriptors of the tiles TMA writes with the 128-byte swizzle, and the
// warp-group controls (fences, register reallocation, the named barriers of the ping-pong). sm_90a
// only.
#pragma once

#include <cstdint>

namespace avdit::cuda::sm90 {

// A [R][128] bf16 tile as two TMA boxes of 64 columns (128 bytes a row), box h at h * R * 128
// bytes, each in 8-row atoms of 1,024 bytes (the tile 1,024-byte aligned). The K-major descriptor
// of k-step ks (16 columns) of rows [row0, ...): leading offset unused with a swizzle (1), stride
// offset 1,024 bytes (atom to atom), 128-byte swizzle.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr, uint32_t lead, uint32_t stride) {
  return uint64_t{(addr & 0x3FFFFu) >> 4} | (uint64_t{lead >> 4} << 16) |
         (uint64_t{stride >> 4} << 32) | (uint64_t{1} << 62);
}
template <int R>
__device__ __forceinline__ uint64_t desc_k_major(uint32_t tile, int row0, int ks) {
  return desc_sw128(tile + (ks >> 2) * R * 128 + row0 * 128 + (ks & 3) * 32, 16, 1024);
}
// V [keys][dims] as it lies in memory, read as the transposed (MN-major) B of O += P V: a tile of
// kKeys keys x 128 dims as two boxes of 64 dims (kKeys * 128 bytes apart). k-step ks covers keys
// 16 ks ..; the leading offset is the distance between the two 64-dim halves, the stride 1,024
// bytes between 8-key groups.
template <int kKeys>
__device__ __forceinline__ uint64_t desc_v_mn_major(uint32_t tile, int ks) {
  return desc_sw128(tile + ks * 16 * 128, kKeys * 128, 1024);
}

// 2^x flushing subnormal results to zero (one MUFU.EX2). exp2f keeps results under 2^-126 subnormal,
// which costs a compare and two predicated multiplies per call; a softmax probability that small
// beside its row's max changes nothing a bf16 or fp32 output shows. exp2_ftz(-inf) = 0.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins accumulators after a wait: the compiler may not move their uses above it.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
// Named barriers over two warp groups (256 threads): one waits, the other arrives.
__device__ __forceinline__ void named_sync256(int id) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void named_arrive256(int id) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
}

#define AVDIT_WGMMA_D64                                                                           \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define AVDIT_WGMMA_REGS64                                                                           \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "  \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "  \
  "%59, %60, %61, %62, %63}"

#define AVDIT_WGMMA_D88 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
#define AVDIT_WGMMA_REGS88 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87"
// d (+)= A (smem) B (smem), m64n128k16, both K-major; accumulate = 0 overwrites d. The thread's
// d[i] is row g + 8 ((i >> 1) & 1) of its warp's 16 (g = lane / 4), column 8 (i >> 2) + 2 (lane %
// 4) + (i & 1).
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t da, uint64_t db,
                                                    int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " AVDIT_WGMMA_REGS64
               ", %64, %65, p, 1, 1, 0, 0;\n}\n"
               : AVDIT_WGMMA_D64
               : "l"(da), "l"(db), "r"(accumulate));
}
// The same product over 176 columns (88 accumulators a thread, the same element order).
__device__ __forceinline__ void wgmma_m64n176k16_ss(float (&d)[88], uint64_t da, uint64_t db,
                                                    int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 {" AVDIT_WGMMA_REGS88 "}"
               ", %88, %89, p, 1, 1, 0, 0;\n}\n"
               : AVDIT_WGMMA_D88
               : "l"(da), "l"(db), "r"(accumulate));
}
// d += A (registers: each warp's 16 rows x 16 k as the m16n8k16 A fragment, which is what two
// adjacent column blocks of an accumulator hold) B (smem; kTransB = 1: MN-major).
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const unsigned (&a)[4],
                                                    uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " AVDIT_WGMMA_REGS64
               ", {%64, %65, %66, %67}, %68, p, 1, 1, %69;\n}\n"
               : AVDIT_WGMMA_D64
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(kTransB));
}
// e4m3 (the FP8 attention kernel, ops/cuda/sm90/attention_fp8_sm90.cu):
// d (+)= A B, m64n128k32, e4m3 in, f32 out, both from shared memory (K-major: FP8 has no other).
__device__ __forceinline__ void wgmma_e4m3_ss(float (&d)[64], uint64_t da, uint64_t db, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " AVDIT_WGMMA_REGS64
               ", %64, %65, p, 1, 1;\n}\n"
               : AVDIT_WGMMA_D64
               : "l"(da), "l"(db), "r"(accumulate));
}
// d += A B with A from registers: the warp's 16 rows x 32 k as the m16n8k32 8-bit A fragment
// (a0: row g, k 4t..4t+3; a1: row g + 8; a2, a3: k + 16), byte 0 the lowest k.
__device__ __forceinline__ void wgmma_e4m3_rs(float (&d)[64], const unsigned (&a)[4], uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " AVDIT_WGMMA_REGS64
               ", {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
               : AVDIT_WGMMA_D64
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
#undef AVDIT_WGMMA_D64
#undef AVDIT_WGMMA_D88
#undef AVDIT_WGMMA_REGS88
#undef AVDIT_WGMMA_REGS64

// Four floats to four e4m3 bytes (nearest even, saturating), x0 in the lowest.
__device__ __forceinline__ unsigned pack_e4m3x4(float x0, float x1, float x2, float x3) {
  unsigned short lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x1), "f"(x0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x3), "f"(x2));
  return unsigned(lo) | (unsigned(hi) << 16);
}

}  // namespace avdit::cuda::sm90
