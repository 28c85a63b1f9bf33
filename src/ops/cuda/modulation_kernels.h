// Launchers of the adaLN block's fused kernels (modulation.cu): plain pointers and sizes, no Tensor;
// the ops in ops/modulation.h check the tensors and call these. Nothing here allocates or
// synchronises.
//
// Storage types: `bf16` false = fp32 activations (the parity mode), true = bf16 activations (the
// production mode). In bf16 mode the element-wise kernels also reproduce the CPU emulation's
// rounding points (ops/cpu/modulation.cpp: every PyTorch bf16 op rounds its result), computed in
// registers at no extra memory traffic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace avdit::cuda {

// One adaLN operand: element (table row t, channel c) at base[t * stride + c] (a slice of the
// per-timestep table, stored in the activation dtype).
struct TableSlice {
  const void* base = nullptr;
  int64_t stride = 0;
};

// Fused residual + RMSNorm + modulation, one block per row:
//   if f:         x[r] = x[r] + gate[row[r]] * f[r]  (plain x + f without gate.base; written back)
//   if out:       out[r] = rmsnorm(x[r]; w) * (1 + scale[row2[r]]) + shift[row2[r]]
// (no modulation when shift.base is null). x, f, w, tables, out in the activation dtype, except
// out_f32: out stored as fp32 (the final layer feeds fp32 heads; values still rounded to bf16 in
// bf16 mode). row2 may equal row (the final layer indexes by timestep only).
struct ResidNormArgs {
  void* x = nullptr;
  const void* f = nullptr;
  TableSlice gate;
  const int* row = nullptr;
  const void* w = nullptr;
  float eps = 1e-5f;
  TableSlice shift, scale;
  const int* row2 = nullptr;
  void* out = nullptr;
  bool out_f32 = false;
  bool zero_gate_guard = false;  // a zero gate adds nothing, even to a non-finite f
  int64_t S = 0, H = 0;
};
void resid_norm_modulate(cudaStream_t st, bool bf16, const ResidNormArgs& a);
// The fp16 activations' version (modulation_f16.cu): w, tables and out in fp16 (or out_f32), the
// residual x and f in fp16, or both in fp32 (x_f32: the fp16 recipe's widened residual).
void resid_norm_modulate_f16(cudaStream_t st, bool x_f32, const ResidNormArgs& a);

// qkv grouped per head [S, heads, 3, D] -> q, k, v [S, heads, D]: per-head RMSNorm of q and k
// (weights [D] shared by all heads), then (rope) split-half RoPE on dims [0, 2 half) with
// cos / sin [S, half] fp32 tables; v copied. D must be 128. One warp per (row, head), each lane
// moving 4 elements at once: qkv, q, k, v and the norm weights must be 16-byte aligned (the
// model's arena slices and weight allocations are).
void qk_norm_rope(cudaStream_t st, bool bf16, const void* qkv, const void* q_norm, const void* k_norm,
                  float eps, const float* cos, const float* sin, int64_t half, bool rope, void* q, void* k,
                  void* v, int64_t S, int64_t heads, int64_t D);

// out [S, F] = silu(u[:, :F]) * u[:, F:], u [S, 2F]. bf16 with F % 8 == 0 and 16-byte aligned
// pointers: 16-byte accesses; otherwise the scalar kernel. resid_norm_modulate likewise (H % 8 == 0,
// H <= 8192, aligned pointers and table strides).
void swiglu(cudaStream_t st, bool bf16, const void* u, void* out, int64_t S, int64_t F);

// fp16 storage (modulation_f16.cu): qk_norm_rope's kernel on fp16 qkv, q, k, v and norm weights;
// swiglu of an fp16 u into fp16, or into fp32 (out_f32: the recipe's gating product in fp32, the
// silu still rounded to fp16).
void qk_norm_rope_f16(cudaStream_t st, const void* qkv, const void* q_norm, const void* k_norm, float eps,
                      const float* cos, const float* sin, int64_t half, bool rope, void* q, void* k, void* v,
                      int64_t S, int64_t heads);
void swiglu_f16(cudaStream_t st, const void* u, void* out, bool out_f32, int64_t S, int64_t F);

// Deterministic pseudo-normal fill, mean + std * z (z from a counter hash and Box-Muller; never
// all zeros), in fp32, bf16 or fp16 storage. Different `seed`s give independent tensors.
void fill_normal(cudaStream_t st, void* p, DType dtype, int64_t n, uint64_t seed, float mean, float std);

}  // namespace avdit::cuda
