// Reference windowed attention on the CPU, float32: per query segment and head, the scores of the
// segment's queries against each of its key ranges side by side (sgemm_fixed), one softmax over
// them all, then p v accumulated range by range. One task per (segment, head) on the CPU pool:
// every task's arithmetic is fixed, so the result is the same for any thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/thread_pool.h"
#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"
#include "ops/windowed_attention.h"

namespace avdit::ops::cpu {

void windowed_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, float scale,
                        const WindowPlan& plan, const Tensor* gate, Tensor& out_t, Tensor* lse) {
  const int64_t S = q_in.size(0), Hq = q_in.size(1), D = q_in.size(2), Hkv = k_in.size(1);
  const int64_t group = Hq / Hkv;
  const Tensor q = f32(q_in), k = f32(k_in), v = f32(v_in);
  Tensor out = Tensor::zeros({S, Hq, D}, DType::F32);
  std::vector<float> lse_v(static_cast<size_t>(S * Hq), -std::numeric_limits<float>::infinity());
  const float *pq = q.f32(), *pk = k.f32(), *pv = v.f32();
  float* po = out.f32();
  const int64_t nseg = static_cast<int64_t>(plan.segments.size());
  // Score rows of a query block stay below ~16 M floats however many keys a segment has.
  const int64_t block_cap =
      std::max<int64_t>(1, (int64_t{1} << 24) / std::max<int64_t>(1, plan.max_keys));
  cpu_pool().run(nseg * Hq, [&](int64_t task) {
    const int64_t s = task / Hq, h = task % Hq, kh = h / group;
    const Range seg = plan.segments[s];
    const int64_t k0 = plan.offsets[s], k1 = plan.offsets[s + 1];
    int64_t nk = 0;
    for (int64_t r = k0; r < k1; ++r) nk += plan.keys[r].size();
    std::vector<float> scores;
    for (int64_t qb = seg.begin; qb < seg.end; qb += block_cap) {
      const int64_t m = std::min(block_cap, seg.end - qb);
      scores.resize(static_cast<size_t>(m * nk));
      int64_t col = 0;
      for (int64_t r = k0; r < k1; ++r) {
        const Range kr = plan.keys[r];
        sgemm_fixed(true, m, kr.size(), D, scale, pq + (qb * Hq + h) * D, Hq * D,
                    pk + (kr.begin * Hkv + kh) * D, Hkv * D, 0.f, scores.data() + col, nk);
        col += kr.size();
      }
      for (int64_t i = 0; i < m; ++i) {
        float* row = scores.data() + i * nk;
        const float mx = *std::max_element(row, row + nk);
        double sum = 0;
        for (int64_t j = 0; j < nk; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t j = 0; j < nk; ++j) row[j] *= inv;
        lse_v[(qb + i) * Hq + h] = mx + static_cast<float>(std::log(sum));
      }
      col = 0;
      for (int64_t r = k0; r < k1; ++r) {
        const Range kr = plan.keys[r];
        sgemm_fixed(false, m, D, kr.size(), 1.f, scores.data() + col, nk,
                    pv + (kr.begin * Hkv + kh) * D, Hkv * D, r == k0 ? 0.f : 1.f,
                    po + (qb * Hq + h) * D, Hq * D);
        col += kr.size();
      }
    }
  });
  if (gate) {
    // As ops::attention's gate: the core rounded to out's dtype, times the rounded sigmoid,
    // rounded.
    const Tensor g = f32(*gate);
    const DType ot = out_t.dtype();
    for (int64_t t = 0; t < S; ++t)
      for (int64_t h = 0; h < Hq; ++h) {
        const float sg =
            round_to(ot, 1.0f / (1.0f + std::exp(-std::as_const(g).f32()[t * Hq + h])));
        float* row = po + (t * Hq + h) * D;
        for (int64_t i = 0; i < D; ++i) row[i] = round_to(ot, round_to(ot, row[i]) * sg);
      }
  }
  store(out_t, po);
  if (lse) std::copy(lse_v.begin(), lse_v.end(), lse->f32());
}

}  // namespace avdit::ops::cpu
