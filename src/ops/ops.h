// The op set the models are written against. Activations are F32; weights may be F32, BF16 or
// F16 and are widened on the fly (in row blocks, so mapped weights are never copied whole). This
// CPU implementation is the oracle the CUDA kernels are checked against.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace avdit::ops {

// y[..., out] = x[..., in] · w[out, in]^T (+ bias[out]).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias = nullptr);
// c[M, N] = a[M, K] · b[K, N].
Tensor matmul(const Tensor& a, const Tensor& b);

// x / sqrt(mean(x^2) + eps) * w over the last dim; w undefined means no weight; with
// one_plus_weight the weight is zero-centred and applied as (1 + w).
Tensor rms_norm(const Tensor& x, const Tensor& w, float eps, bool one_plus_weight = false);

Tensor silu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor add(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
void add_(Tensor& a, const Tensor& b);
Tensor concat_rows(const std::vector<Tensor>& parts);

// Softmax attention. q [S, Hq, D], k and v [S, Hkv, D] (query head h reads kv head h / (Hq/Hkv)).
// Tokens attend within their segment [cu_seqlens[i], cu_seqlens[i+1]) (empty: one segment).
// sinks ([Hq] or [1, Hq]): a per-head logit that adds exp(sink) to the softmax denominator only.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                 const std::vector<int64_t>& cu_seqlens = {}, const Tensor* sinks = nullptr);

// Rotate-half (NeoX) rotary embedding on dims [0, R) of every head, in place. x [S, H, D];
// cos, sin [S, R/2]: x'_i = x_i cos_i - x_{i+R/2} sin_i, x'_{i+R/2} = x_{i+R/2} cos_i + x_i sin_i.
void rope_rotate_half_(Tensor& x, const Tensor& cos, const Tensor& sin);

}  // namespace avdit::ops
