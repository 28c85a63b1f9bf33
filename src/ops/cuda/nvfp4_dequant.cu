// NVFP4 -> bf16 dequantisation of packed routed experts on the GPU (see nvfp4.h), the same fp32
// operations in the same order as quant::nvfp4_decode on the CPU, so the two are bit-identical:
// (e2m1(q) * e4m3(bs)) is exact, then one IEEE divide by S (__fdiv_rn: never the fast reciprocal),
// then round to bf16 (RNE). One thread per 16-element block: 8 bytes of codes, one scale byte in,
// 32 bytes of bf16 out (two 16-byte stores), so the kernel is a pure streaming copy.
#include <cuda_bf16.h>

#include "ops/cuda/common.cuh"
#include "ops/cuda/nvfp4_dequant.h"

namespace avdit::cuda {
namespace {

constexpr int64_t kBlock = 16;  // quant::kNvfp4Block (not included: quant/ headers are C++20)

__device__ __forceinline__ float e2m1_value(uint32_t code) {
  // {0, 0.5, 1, 1.5, 2, 3, 4, 6} from the bits (bias 1, 1 mantissa bit; no table in local memory);
  // the sign is bit 3 (code 8 is -0: the product keeps the sign, as on the CPU).
  const uint32_t e = (code >> 1) & 3u, m = code & 1u;
  const float a = e == 0 ? 0.5f * static_cast<float>(m)
                         : __int_as_float(static_cast<int>(((e + 126u) << 23) | (m << 22)));
  return (code & 8u) ? -a : a;
}

__device__ __forceinline__ float e4m3_value(uint32_t v) {
  // Exact decode from the definition (bias 7, 3 mantissa bits; 0x7F / 0xFF are NaN).
  const uint32_t mag = v & 0x7Fu, e = mag >> 3, m = mag & 7u;
  float a;
  if (mag == 0x7Fu)
    a = __int_as_float(0x7FC00000);
  else if (e == 0)
    a = static_cast<float>(m) * 0.001953125f;  // m * 2^-9, exact
  else
    a = __int_as_float(static_cast<int>(((e + 120u) << 23) | (m << 20)));  // (1 + m/8) 2^(e-7)
  return (v & 0x80u) ? -a : a;
}

__global__ void dequant_kernel(const uint2* __restrict__ packed, const uint8_t* __restrict__ scales,
                               const float* __restrict__ global_scale, int64_t g0,
                               int64_t blocks_per_expert, int64_t n_blocks, int64_t blocks_per_row,
                               int row_step, int row_offset, uint4* __restrict__ out) {
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < n_blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const int64_t src = g0 * blocks_per_expert + b;  // block index in the whole stack
    const float s = global_scale[g0 + b / blocks_per_expert];
    const float bs = e4m3_value(scales[src]);
    const uint2 codes = packed[src];
    uint32_t words[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t byte = ((i < 4 ? codes.x : codes.y) >> (8 * (i & 3))) & 0xFFu;
      // Low nibble = the even k. __fmul_rn / __fdiv_rn: no contraction, no approximate divide.
      const float lo = __fdiv_rn(__fmul_rn(e2m1_value(byte & 0xFu), bs), s);
      const float hi = __fdiv_rn(__fmul_rn(e2m1_value(byte >> 4), bs), s);
      const uint32_t lo_bits = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
      const uint32_t hi_bits = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
      words[i] = lo_bits | (hi_bits << 16);
    }
    // Output row r of the plain layout lands on row r * row_step + row_offset (interleaving).
    const int64_t r = b / blocks_per_row,
                  o = (r * row_step + row_offset) * blocks_per_row + b % blocks_per_row;
    out[2 * o] = make_uint4(words[0], words[1], words[2], words[3]);
    out[2 * o + 1] = make_uint4(words[4], words[5], words[6], words[7]);
  }
}

}  // namespace

void dequantize_nvfp4_bf16(Device& dev, const Tensor& packed, const Tensor& scales,
                           const Tensor& global_scale, int64_t g0, int64_t g1, Tensor& out,
                           int row_step, int row_offset) {
  require_cuda(packed, "dequantize_nvfp4_bf16 packed");
  require_cuda(scales, "dequantize_nvfp4_bf16 scales");
  require_cuda(global_scale, "dequantize_nvfp4_bf16 global_scale");
  require_cuda(out, "dequantize_nvfp4_bf16 out");
  AVDIT_REQUIRE(packed.dtype() == DType::U8 && packed.ndim() == 3,
                "dequantize_nvfp4_bf16: packed must be U8 [G, N, K/2], got {} {}",
                dtype_name(packed.dtype()), packed.shape_str());
  const int64_t G = packed.size(0), N = packed.size(1), K = 2 * packed.size(2);
  AVDIT_REQUIRE(K % kBlock == 0,
                "dequantize_nvfp4_bf16: K = {} (packed {}) is not a multiple of {}", K,
                packed.shape_str(), kBlock);
  AVDIT_REQUIRE(scales.dtype() == DType::F8_E4M3 && scales.shape() == (Shape{G, N, K / kBlock}),
                "dequantize_nvfp4_bf16: scales must be F8_E4M3 [{}, {}, {}], got {} {}", G, N,
                K / kBlock, dtype_name(scales.dtype()), scales.shape_str());
  AVDIT_REQUIRE(global_scale.dtype() == DType::F32 && global_scale.numel() == G,
                "dequantize_nvfp4_bf16: global_scale must be F32 [{}], got {} {}", G,
                dtype_name(global_scale.dtype()), global_scale.shape_str());
  AVDIT_REQUIRE(0 <= g0 && g0 <= g1 && g1 <= G,
                "dequantize_nvfp4_bf16: expert range [{}, {}) outside [0, {})", g0, g1, G);
  AVDIT_REQUIRE(row_step >= 1 && 0 <= row_offset && row_offset < row_step,
                "dequantize_nvfp4_bf16: row_offset {} outside [0, row_step {})", row_offset,
                row_step);
  AVDIT_REQUIRE(out.dtype() == DType::BF16 && out.shape() == (Shape{g1 - g0, N * row_step, K}),
                "dequantize_nvfp4_bf16: out must be BF16 [{}, {}, {}], got {} {}", g1 - g0,
                N * row_step, K, dtype_name(out.dtype()), out.shape_str());
  // 8-byte code loads and 16-byte stores (row starts are aligned whenever the bases are: K / 2 is a
  // multiple of 8 bytes and 2 K of 32).
  AVDIT_REQUIRE(reinterpret_cast<uintptr_t>(packed.raw()) % 8 == 0 &&
                    reinterpret_cast<uintptr_t>(out.raw()) % 16 == 0,
                "dequantize_nvfp4_bf16: packed must be 8-byte and out 16-byte aligned");
  const int64_t blocks_per_expert = N * (K / kBlock), n_blocks = (g1 - g0) * blocks_per_expert;
  if (n_blocks == 0) return;
  dequant_kernel<<<grid_for(n_blocks), kThreads, 0, dev.stream()>>>(
      static_cast<const uint2*>(packed.raw()), static_cast<const uint8_t*>(scales.raw()),
      static_cast<const float*>(global_scale.raw()), g0, blocks_per_expert, n_blocks, K / kBlock,
      row_step, row_offset, static_cast<uint4*>(device_ptr(out)));
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda
