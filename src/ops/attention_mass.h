// The softmax mass sets of keys hold, per query, from the exact scores (the attention sparsity
// probe, analysis/attention/sparsity.h). For query row r_i of one head of q [S, H, D] over the keys
// [begin, end) of the same head of k [S, H, D], p_j = softmax_j(scale q_r . k_j):
//   pattern[i] = the sum of p_j over the keys j with frame[j] < 0 or frame[j] == frame[r_i]
//   topk[i]    = the sum of the top_k[i] largest p_j
// Two passes over the keys: the log-sum-exp, then the masses. The CPU scores in float64 (the
// reference); the GPU in float32 with float64 sums (within 1e-5 of the CPU: the op test).
#pragma once

#include <cstdint>

#include "ops/dispatch.h"

namespace avdit::ops {

struct MassQueries {
  Tensor rows;                 // I32 [n]: the query rows
  Tensor top_k;                // I32 [n]: the keys each query's top-k mass takes (1 .. end - begin)
  Tensor frame;                // I32 [S]: each row's frame id, -1 for a non-video row
  int64_t begin = 0, end = 0;  // the keys: one attention document
};

namespace cpu {
void attention_mass(const Tensor& q, const Tensor& k, int64_t head, double scale,
                    const MassQueries& m, Tensor& topk, Tensor& pattern);
}
namespace cuda {
void attention_mass(CudaContext& c, const Tensor& q, const Tensor& k, int64_t head, double scale,
                    const MassQueries& m, Tensor& topk, Tensor& pattern);
}

// topk, pattern: F64 [n] on ctx.
inline void attention_mass(Context& ctx, const Tensor& q, const Tensor& k, int64_t head,
                           double scale, const MassQueries& m, Tensor& topk, Tensor& pattern) {
  AVDIT_OP(ctx, attention_mass, q, k, head, scale, m, topk, pattern);
}

// The operand checks both backends make (BadInput naming the operand).
void check_attention_mass(const Tensor& q, const Tensor& k, int64_t head, const MassQueries& m,
                          const Tensor& topk, const Tensor& pattern);

}  // namespace avdit::ops
