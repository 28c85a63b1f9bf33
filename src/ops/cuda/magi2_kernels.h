// The MAGI-2 preview's model-specific CUDA kernels (thin launchers; kernels.cu): mHC coefficients with
// Sinkhorn, stream mixing, the fused QK-norm + RoPE + packed-order split of the fused QKV output, the per-head
// gate, the embedding epilogue (bias + time overwrite), the time embedding and RoPE tables, and a row gather
// that never synchronises. CPU references: models/magi2/{mhc,attention,model,packing}.cpp.
// Every launcher enqueues exactly one kernel on dev.stream() (zero when there is no work) and never
// synchronises; index tensors are I32 on the device and were validated on the host by the caller.
#pragma once

#include <cstdint>

#include "backend/cuda/device.h"

namespace avdit::cuda::magi2 {

// The most mHC streams the coefficient kernel holds in registers (the preview uses 4).
inline constexpr int64_t kMaxMhcStreams = 8;

// out[r] = x[index[r]] along dim 0, bytes copied as they are (any dtype). out is preallocated [R, ...].
void gather_rows_into(Device& dev, const Tensor& x, const Tensor& index, Tensor& out);

// Embedding epilogue, per permuted row r and channel c of the [L, R] embedder GEMM output y (F32):
// pre = y[r, c] + bias[group[r], c]; value = c < tc ? time[perm[r], c] : pre (the time embedding
// OVERWRITES the first tc channels, text rows included); s[r, c] = value in s's dtype. pre_time / embed
// (F32, may be undefined) receive pre and value for dumps. bias [3, R] F32, time [L, tc] F32 packed order.
void embed_epilogue(Device& dev, const Tensor& y, const Tensor& bias, const Tensor& group, const Tensor& time,
                    const Tensor& perm, int64_t tc, Tensor& s, Tensor* pre_time, Tensor* embed);

// sinusoidal_embedding_1d of the reference (packing.h time_embedding): t [L] F32 -> out [L, dim] F32.
void time_embedding(Device& dev, const Tensor& t, int64_t dim, Tensor& out);

// ElementWiseFourierEmbed (packing.h rope_table): coords [L, 9] F32, bands [B] F32 -> out [L, 6B] F32.
void rope_table(Device& dev, const Tensor& coords, const Tensor& bands, Tensor& out);

// The mHC coefficient epilogue after h = RMSNorm(s) . phi ([L, 2n + n*n] F32, columns pre | post | res):
// h_pre = sigmoid(a_pre h + b_pre), h_post = 2 sigmoid(a_post h + b_post), h_res = Sinkhorn(a_res h + b_res)
// (20 iterations, columns then rows, eps 1e-12, on exp(Z - max Z)); a_* already include 1/sqrt(n*hidden).
// round_bf16: the values are rounded to bf16 (the reference casts them to the bf16 stream dtype); they are
// stored as F32 either way. Outputs preallocated: h_pre, h_post [L, n], h_res [L, n, n] F32.
struct MhcScalars {
  float a_pre = 0, a_post = 0, a_res = 0;
};
void mhc_coefficients_epilogue(Device& dev, const Tensor& h, const MhcScalars& a, const Tensor& bias_pre,
                               const Tensor& bias_post, const Tensor& bias_res, int64_t n, bool round_bf16,
                               Tensor& h_pre, Tensor& h_post, Tensor& h_res);

// out[l, x] = sum_k h_pre[l, k] s[l, k, x] (fp32, k ascending): s [L, n*hidden] -> out [L, hidden], out's dtype.
void mhc_apply_pre(Device& dev, const Tensor& s, const Tensor& h_pre, int64_t n, Tensor& out);

// In place: s[l, i, x] = sum_j h_res[l, i, j] s[l, j, x] + h_post[l, i] o[l, x] (fp32, j ascending), stored in
// s's dtype. s [L, n*hidden], o [L, hidden] (any float dtype).
void mhc_hyper_connect_(Device& dev, Tensor& s, const Tensor& o, const Tensor& h_post, const Tensor& h_res,
                        int64_t n);

// The attention prologue after the fused QKV linear, into packed token order: for packed token p (permuted row
// inv[p]) q and k heads are RMS-normalised over head_dim with the weight row of the token's group ((1 + w),
// eps 1e-6; group undefined = row 0), rotated (rotate-half on the first 2*half dims, the rope table
// [L, 6B] = [sin | cos] in packed order, half = 3B) and stored; v is copied. qkv [L, (Hq + 2 Hkv) D]
// (permuted rows, columns q | k | v head-major); q_norm, k_norm [G, D] F32; q_out [L, Hq, D],
// k_out / v_out [L, Hkv, D] preallocated in the wanted dtype (bf16 storage = the reference's bf16 FA3 inputs).
void qkv_prologue(Device& dev, const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor* group,
                  const Tensor& inv, const Tensor& rope, int64_t half, int64_t Hq, int64_t Hkv, int64_t D,
                  Tensor& q_out, Tensor& k_out, Tensor& v_out);

// The per-head gate back in permuted order: out[r, h, :] = o[perm[r], h, :] * sigmoid(g[r, h]). round_bf16:
// the sigmoid is rounded to bf16 first (torch.sigmoid of a bf16 tensor); the product is stored in out's dtype.
// o [L, Hq, D] packed, g [L, Hq] permuted, out [L, Hq * D].
void gate_unpermute(Device& dev, const Tensor& o, const Tensor& g, const Tensor& perm, bool round_bf16,
                    Tensor& out);

}  // namespace avdit::cuda::magi2
