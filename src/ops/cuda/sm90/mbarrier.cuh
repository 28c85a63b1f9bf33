// mbarrier waits and arrivals written so that ptxas keeps the wgmmas around them asynchronous, TMA
// tile loads, and the bf16 TMA descriptors with the 128-byte swizzle that GMMA's K-major layouts
// read: for our own Hopper kernels (moe_fused_experts.cu, windowed_attention_sm90.cu). Included
// only by files under ops/cuda/sm90/ (it needs the sm_90 PTX and the driver's tensor-map API).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>

#include "ops/cuda/common.cuh"

namespace avdit::cuda::sm90 {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void bar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(count));
}
// The spin loop is inside the PTX: a C++ branch around it would make ptxas treat the wgmmas after
// it as being on a divergent path and serialise them.
// On a shared-memory address (smem_u32): converting a pointer costs a generic-to-shared conversion
// (the CTA's window in the cluster) at each call, which hot loops can hoist by keeping the address.
__device__ __forceinline__ void bar_wait(uint32_t b, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra "
      "WAIT;\n}\n" ::"r"(b),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bar_wait(uint64_t* b, uint32_t parity) {
  bar_wait(smem_u32(b), parity);
}
__device__ __forceinline__ void bar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(b)) : "memory");
}
// bar_arrive if `pred`, as a predicated instruction rather than a branch (see bar_wait).
__device__ __forceinline__ void bar_arrive_if(uint32_t b, bool pred) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.u32 p, %1, 0;\n @p mbarrier.arrive.shared::cta.b64 _, "
      "[%0];\n}\n" ::"r"(b),
      "r"(uint32_t(pred))
      : "memory");
}
__device__ __forceinline__ void bar_arrive_if(uint64_t* b, bool pred) {
  bar_arrive_if(smem_u32(b), pred);
}
__device__ __forceinline__ void bar_expect(uint32_t b, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bar_init(uint32_t b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(b), "r"(count));
}
// A 3-D TMA tile load into shared memory that completes `bytes` on mbarrier `bar` (shared
// addresses); coordinates innermost first, in elements.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void bar_expect(uint64_t* b, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)),
               "r"(bytes)
               : "memory");
}

// cuTensorMapEncodeTiled from the driver (no link against libcuda).
inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    AVDIT_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                                      cudaEnableDefault, &q));
    AVDIT_REQUIRE(
        q == cudaDriverEntryPointSuccess && f,
        "the CUDA driver has no cuTensorMapEncodeTiled (a driver for CUDA 12+ is needed)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A tensor map of `type` elements with the 128-byte swizzle (what GMMA::Layout_K_SW128_Atom reads),
// zero fill outside the tensor. dims innermost first; strides (bytes) of dims 1..rank-1; `what`
// names the operand in the error.
inline CUtensorMap make_tma_map(CUtensorMapDataType type, const void* base, int rank,
                                const cuuint64_t* dims, const cuuint64_t* strides,
                                const cuuint32_t* box, const char* what) {
  CUtensorMap m;
  const cuuint32_t elem[5] = {1, 1, 1, 1, 1};
  const CUresult r = encode_tiled()(
      &m, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), dims, strides, box, elem,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  AVDIT_REQUIRE(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed ({}) for {}", int(r), what);
  return m;
}
inline CUtensorMap make_tma_map_bf16(const void* base, int rank, const cuuint64_t* dims,
                                     const cuuint64_t* strides, const cuuint32_t* box,
                                     const char* what) {
  return make_tma_map(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, rank, dims, strides, box, what);
}

}  // namespace avdit::cuda::sm90
