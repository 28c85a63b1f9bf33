// The op set on the CUDA backend: the same operations as ops/ops.h (the CPU oracle each kernel is
// tested against) plus the model-specific element-wise steps both DiTs need. Tensors live on the
// device; inputs may be F32, BF16 or F16 and all math is fp32. Ops enqueue on dev.stream().
#pragma once

#include <optional>

#include "backend/cuda/device.h"

namespace avdit::cuda {

// Converting copy (F32 / BF16 / F16, round to nearest even).
Tensor cast(Device& dev, const Tensor& x, DType dtype);
// out[r] = x[index[r]] over dim 0; index: I32 [R] on the device. out [R, ...].
Tensor gather_rows(Device& dev, const Tensor& x, const Tensor& index);

// y[..., N] = x[..., K] · w[N, K]^T (+ bias[N]) (+ residual) through cuBLASLt with fp32
// accumulation. x and w F32/BF16/F16; when their dtypes differ both are widened to F32 (exact,
// slower). out is F32 or BF16 (F16 too for F16 inputs). residual: y's shape; in `out`'s dtype it is
// the GEMM's C operand (added to the fp32 accumulator before the one rounding, no separate pass),
// otherwise it is added after the GEMM.
Tensor linear(Device& dev, const Tensor& x, const Tensor& w, const Tensor* bias = nullptr,
              DType out = DType::F32, const Tensor* residual = nullptr);

// out[..., n] = y[..., n] + bias[n] (bias may be null: a plain cast), converted to `out`.
Tensor add_bias(Device& dev, const Tensor& y, const Tensor* bias, DType out);

// x / sqrt(mean(x^2) + eps) * g over the last dim, g = w or (1 + w) with one_plus_weight; w
// undefined: no weight. w is [D] or [G, D]: with G > 1, `group` (I32 [T] on the device) picks the
// weight row of each token, where the rows of x split evenly into T tokens (x [T, D] or [T, H, D]).
// out: the dtype of the result (default x's).
Tensor rms_norm(Device& dev, const Tensor& x, const Tensor& w, float eps, bool one_plus_weight = false,
                const Tensor* group = nullptr, std::optional<DType> out = {});

// Element-wise; the result has the first operand's dtype unless `out` says otherwise.
Tensor silu(Device& dev, const Tensor& x);
Tensor sigmoid(Device& dev, const Tensor& x);
Tensor add(Device& dev, const Tensor& a, const Tensor& b);
Tensor mul(Device& dev, const Tensor& a, const Tensor& b);
void add_(Device& dev, Tensor& a, const Tensor& b);  // a += b

// SwiGLU with the gate first: gate_up [..., 2F] -> silu(g) * u, [..., F] (H3 MLP).
Tensor swiglu(Device& dev, const Tensor& gate_up, std::optional<DType> out = {});
// swiglu7 (MAGI-2): g' = min(g, 7), l' = clamp(l, -7, 7), g' sigmoid(1.702 g') (l' + 1).
// Interleaved channels (even = gate, odd = linear): u [..., 2I] -> [..., I]. With `into` (a 2-D
// [rows, L] tensor of the out dtype): written into its columns col .. col + I - 1 instead, and returned
// (the MAGI-2 MoE puts the shared expert's h beside the routed experts' output for one merge GEMM).
Tensor swiglu7_interleaved(Device& dev, const Tensor& u, std::optional<DType> out = {}, Tensor* into = nullptr,
                           int64_t col = 0);
// Separate halves: g, l [..., I] -> [..., I].
Tensor swiglu7_split(Device& dev, const Tensor& g, const Tensor& l, std::optional<DType> out = {});

// [a | b]: two matrices with the same rows side by side, [N, Ka] and [N, Kb] -> [N, Ka + Kb] (same dtype;
// one strided copy each). The MAGI-2 layer keeps its merge and shared_fc2 weights this way, K-concatenated,
// so one GEMM computes both and sums them.
Tensor concat_columns(Device& dev, const Tensor& a, const Tensor& b);
// The reverse for one part: columns [col, col + width) of x [N, K] as a new contiguous [N, width].
Tensor slice_columns(Device& dev, const Tensor& x, int64_t col, int64_t width);

// Columns [col, col + H) of a row table [T, W] (adaLN outputs keep shift, scale and gate side by
// side in one table); a token picks its table row through an index.
struct RowTable {
  Tensor table;
  int64_t col = 0;
};
// out[r] = x[r] * (1 + scale[index[r]]) + shift[index[r]]; x [S, H], index I32 [S].
Tensor modulate(Device& dev, const Tensor& x, const RowTable& shift, const RowTable& scale,
                const Tensor& index, std::optional<DType> out = {});
// x[r] += gate[index[r]] * f[r] in place; x [S, H], f [S, H], index I32 [S].
void gated_residual_(Device& dev, Tensor& x, const RowTable& gate, const Tensor& f, const Tensor& index);

// Rotate-half (NeoX) RoPE on dims [0, R) of every head, in place. x [S, H, D]; cos, sin [S, R/2].
void rope_rotate_half_(Device& dev, Tensor& x, const Tensor& cos, const Tensor& sin);

// Softmax attention as ops::attention: q [S, Hq, D], k, v [S, Hkv, D] (GQA), D <= 256. cu_seqlens:
// I32 [n + 1] on the device (undefined: one segment). sinks: [Hq] logits added to each row's
// denominator only. gate: [S, Hq] in the same token order; the output of head h at token s is
// multiplied by sigmoid(gate[s, h]). Result [S, Hq, D] in q's dtype unless `out` says otherwise.
// BF16/F16 q, k, v run cuDNN's flash SDPA (when built with cuDNN and it takes the shape; the sink
// inside cuDNN >= 9.13, else as an exact LSE correction) and one pass applying the gate
// (attention_cudnn.h); F32, or portable = true, runs the portable fp32 kernel (parity mode, fallback).
Tensor attention(Device& dev, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                 const Tensor& cu_seqlens = {}, const Tensor* sinks = nullptr, const Tensor* gate = nullptr,
                 std::optional<DType> out = {}, bool portable = false);

}  // namespace avdit::cuda
