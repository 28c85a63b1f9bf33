// The MAGI-2 preview's input-side tables and the epilogue of its embedders: the sinusoidal time
// embedding of per-token diffusion times, the element-wise Fourier RoPE table of packed
// coordinates, and bias + time overwrite + cast after the embedder GEMMs. float32 in the
// reference's operation order.
#pragma once

#include <cstdint>

#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void embed_epilogue(const Tensor& y, const Tensor& bias, const Tensor& group, const Tensor* time,
                    const Tensor& perm, Tensor& s);
void time_embedding(const Tensor& t, const Tensor& freqs, Tensor& out);
void rope_table(const Tensor& coords, const Tensor& bands, Tensor& out);
}  // namespace cpu
namespace cuda {
void embed_epilogue(CudaContext& c, const Tensor& y, const Tensor& bias, const Tensor& group,
                    const Tensor* time, const Tensor& perm, Tensor& s);
void time_embedding(CudaContext& c, const Tensor& t, const Tensor& freqs, Tensor& out);
void rope_table(CudaContext& c, const Tensor& coords, const Tensor& bands, Tensor& out);
}  // namespace cuda

// Per permuted row r and channel c of the embedder GEMMs' output y (F32 [L, R]): value = c < tc ?
// time[perm[r], c] : y[r, c] + bias[group[r], c] - the time embedding OVERWRITES the first tc
// channels, text rows included - stored in s's dtype. bias F32 [3, R]; group, perm I32 [L]; time
// (null: tc = 0) F32 [L, tc] in packed order.
inline void embed_epilogue(Context& ctx, const Tensor& y, const Tensor& bias, const Tensor& group,
                           const Tensor* time, const Tensor& perm, Tensor& s) {
  AVDIT_OP(ctx, embed_epilogue, y, bias, group, time, perm, s);
}

// sinusoidal_embedding_1d of the reference: pos = t * 1000, out[l] = [cos(pos f_k) | sin(pos f_k)]
// for the frequencies f [dim / 2] (time_frequencies, or a given table), a zero column when dim is
// odd, t itself when dim == 1. t F32 [L] -> out F32 [L, dim].
inline void time_embedding(Context& ctx, const Tensor& t, const Tensor& freqs, Tensor& out) {
  AVDIT_OP(ctx, time_embedding, t, freqs, out);
}

// The reference's frequency table: f_k = exp((-ln(10000) * k) / (dim / 2)), each step rounded to
// float32 (torch on the CPU), F32 [dim / 2] on the host.
Tensor time_frequencies(int64_t dim);

// ElementWiseFourierEmbed: coords F32 [L, 9] = (t, h, w, T, H, W, T_ref, H_ref, W_ref), bands F32
// [B]
// -> out F32 [L, 6B] = [sin(proj) | cos(proj)] in (axis, band) order, proj = (coord - centre) *
// scale
// * band with scale = (ref - 1) / (size - 1) (1 for a singleton axis), centre (size - 1) / 2 on the
// spatial axes and 0 on time. A scale that is not finite is BadInput on the CPU (NaN on the GPU).
inline void rope_table(Context& ctx, const Tensor& coords, const Tensor& bands, Tensor& out) {
  AVDIT_OP(ctx, rope_table, coords, bands, out);
}

}  // namespace avdit::ops
