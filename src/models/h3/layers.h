// The pieces of an H3 block: attention with the per-head grouped qkv_proj, SwiGLU MLP, adaLN
// modulation and gated residuals. Shared by the token refiner (no RoPE, no adaLN) and DiT blocks.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/h3/config.h"
#include "models/h3/precision.h"
#include "models/h3/rope.h"
#include "models/h3/weights.h"

namespace avdit::models::h3 {

// Optional intermediate dumps: when `map` is set, tensors are stored as prefix + name.
struct Dump {
  TensorMap* map = nullptr;
  std::string prefix;
  void put(const std::string& name, const Tensor& t) const {
    if (map) (*map)[prefix + name] = t.clone();
  }
  explicit operator bool() const { return map != nullptr; }
};

// Attn(h) for h [S, H] -> [S, H]: qkv_proj, per-head q/k RMSNorm, RoPE when `rope` is set,
// softmax(q k^T / sqrt(dh)) v inside each [cu[i], cu[i+1]) document, heads concatenated
// head-major, out_proj.
//
// The official qkv_proj is grouped per head (rows [3 dh h, 3 dh (h+1)) = q, k, v of head h).
// Instead of regrouping the weight at load (an owned copy of 12 GB for the full model, or page
// faults on the whole mapping at start), the grouped weight is used as stored and its output
// columns, already grouped per head, are de-interleaved into q, k, v: the same dot products,
// a copy of S x 3I activations per block, and the weights stay memory-mapped.
// `rnd` rounds every activation to bf16 in the emulated production mode (precision.h).
Tensor attention(const BlockWeights& w, const H3Config& config, const Tensor& h,
                 const RopeTables* rope, const std::vector<int64_t>& cu_seqlens, const Dump& dump,
                 const Rounding& rnd = {});

// MLP(h) = fc2(silu(g) * u), [g | u] = fc1(h): the first half of fc1's outputs is the gate.
Tensor mlp(const BlockWeights& w, const Tensor& h, const Rounding& rnd = {});

// [S, 2F] -> [S, F]: silu(gate_up[:, :F]) * gate_up[:, F:].
Tensor swiglu(const Tensor& gate_up, const Rounding& rnd = {});

// out[r] = x[r] * (1 + scale[row[r]]) + shift[row[r]]; scale/shift rows are [n, H] views given by
// base pointer and row stride (they are slices of the adaLN output).
struct ModRows {
  const float* base = nullptr;  // row 0, channel 0
  int64_t stride = 0;           // floats between consecutive rows
  const float* row(int64_t i) const { return base + i * stride; }
};
void modulate_(Tensor& x, const ModRows& shift, const ModRows& scale,
               const std::vector<int64_t>& rows, const Rounding& rnd = {});
// x[r] += gate[row[r]] * f[r].
void gated_residual_(Tensor& x, const ModRows& gate, const Tensor& f,
                     const std::vector<int64_t>& rows, const Rounding& rnd = {});

}  // namespace avdit::models::h3
