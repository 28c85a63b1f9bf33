// ops::attention on the device: cuDNN's flash SDPA on bf16/f16 over the planned segments (the first
// document as one dense graph, the rest as one ragged graph), cuDNN's own sink token where it has
// one (>= 9.13) and the gate in one pass after it; the exact LSE correction where it has none; the
// portable fp32 kernel for F32 and whatever cuDNN refuses. Both take a causal mask (per segment).
// Head dims beyond both (> 256) go through GEMMs (attention_gemm.h). The Own plan runs the
// project's Hopper kernel (windowed_attention_tc.h) over the documents where it applies.
#include <algorithm>
#include <cmath>

#include "backend/cuda/context.h"
#include "core/log.h"
#include "ops/attention.h"
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/attention_gemm.h"
#include "ops/cuda/attention_portable.h"
#include "ops/cuda/windowed_attention_tc.h"
#include "ops/windowed_attention.h"
#include "ops/random.h"
#include "ops/rows.h"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::cudnn_sdpa;
using ::avdit::cuda::SdpaOut;

Segments make_plan(CudaContext& c, const std::vector<int64_t>& cu, SegmentPlan plan) {
  Segments s;
  s.plan = plan;
  s.cu = cu;
  s.cu_ctx = index_tensor(c, cu);
  size_t first = 0;  // documents [first, n) go to the ragged graph
  if (plan == SegmentPlan::Split || plan == SegmentPlan::Own) {  // Own falls back to Split
    s.dense_rows = cu[1];
    first = 1;
  }
  std::vector<int64_t> tail = {0};
  for (size_t i = first; i + 1 < cu.size(); ++i) {
    const int64_t n = cu[i + 1] - cu[i];
    if (n == 0) continue;  // an empty document launches nothing useful
    tail.push_back(tail.back() + n);
    s.tail_max = std::max(s.tail_max, n);
  }
  if (tail.size() > 1) s.tail_cu = index_tensor(c, tail);
  if (plan == SegmentPlan::Own) {
    // The Hopper kernel's table (windowed_attention_tc.h): [segments | offsets | keys | tiles].
    std::vector<int64_t> segs, offsets = {0}, keys, tiles;
    for (size_t i = 0; i + 1 < cu.size(); ++i) {
      const int64_t b = cu[i], e = cu[i + 1];
      if (e == b) continue;
      const int64_t d = static_cast<int64_t>(segs.size() / 2);
      segs.insert(segs.end(), {b, e});
      keys.insert(keys.end(), {b, e});
      offsets.push_back(d + 1);
      for (int64_t r = b; r < e; r += ops::kWindowTileRows) tiles.insert(tiles.end(), {d, r});
    }
    std::vector<int64_t> table = segs;
    for (const auto* part : {&offsets, &keys, &tiles}) table.insert(table.end(), part->begin(), part->end());
    s.own_docs = static_cast<int64_t>(segs.size() / 2);
    s.own_tiles = static_cast<int64_t>(tiles.size() / 2);
    if (s.own_docs > 0) s.own_table = index_tensor(c, table);
  }
  return s;
}

// The Own plan's kernel when it applies (not causal, F32 sinks, and what
// windowed_attention_tc_takes checks: sm_90, bf16 q, k, v of head dim 128, a bf16 or f32 output);
// false: the caller goes on to cuDNN.
bool via_own(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
             const Segments& seg, const Tensor* sinks, const Tensor* gate, Tensor& out) {
  if (!seg.own_table.defined() || seg.causal || (sinks && sinks->dtype() != DType::F32))
    return false;
  ::avdit::cuda::WindowArgs a{};
  a.q = q.raw();
  a.k = k.raw();
  a.v = v.raw();
  a.qt = ::avdit::cuda::elt_of(q, "attention q");
  a.kt = ::avdit::cuda::elt_of(k, "attention k");
  a.vt = ::avdit::cuda::elt_of(v, "attention v");
  a.yt = ::avdit::cuda::elt_of(out, "attention output");
  a.S = a.Sk = q.size(0);
  a.Hq = q.size(1);
  a.Hkv = k.size(1);
  a.D = q.size(2);
  a.scale = scale;
  a.n_seg = seg.own_docs;
  const int* t = seg.own_table.data<int32_t>();
  a.segments = t;
  a.offsets = t + 2 * seg.own_docs;
  a.keys = a.offsets + seg.own_docs + 1;
  a.tiles = a.keys + 2 * seg.own_docs;
  a.n_tiles = seg.own_tiles;
  if (gate) {
    c.require_here(*gate, "attention gate");
    a.gate = gate->raw();
    a.gatet = ::avdit::cuda::elt_of(*gate, "attention gate");
  }
  if (sinks) {
    c.require_here(*sinks, "attention sinks");
    a.sinks = static_cast<const float*>(sinks->raw());
  }
  a.y = ::avdit::cuda::device_ptr(out);
  if (!::avdit::cuda::windowed_attention_tc_takes(a, c.dev().props())) return false;
  ::avdit::cuda::windowed_attention_tc(c.stream(), a);
  return true;
}

// The cuDNN core over the plan into o ([S, Hq, D], q's dtype), cuDNN's sink token when given.
void cudnn_core(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                const Segments& seg, const Tensor* native_sinks, Tensor& o) {
  const int64_t S = q.size(0);
  auto rows = [](const Tensor& t, int64_t r0, int64_t n) { return t.slice_rows(r0, r0 + n); };
  if (seg.dense_rows > 0) {
    const int64_t n = seg.dense_rows;
    SdpaOut into{rows(o, 0, n), {}};
    cudnn_sdpa(c.dev(), rows(q, 0, n), rows(k, 0, n), rows(v, 0, n), scale, {}, &into, native_sinks,
               false, 0, seg.causal);
  }
  if (seg.tail_cu.defined()) {
    const int64_t r0 = seg.dense_rows, n = S - r0;
    SdpaOut into{rows(o, r0, n), {}};
    cudnn_sdpa(c.dev(), rows(q, r0, n), rows(k, r0, n), rows(v, r0, n), scale, seg.tail_cu, &into,
               native_sinks, false, seg.tail_max, seg.causal);
  }
}

bool via_cudnn(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
               const Segments& seg, const Tensor* sinks, const Tensor* gate, Tensor& out) {
  if (!::avdit::cuda::cudnn_attention_available(c.dev(), q, k, v)) return false;
  try {
    const bool native =
        !sinks || (sinks->dtype() == DType::F32 && ::avdit::cuda::cudnn_version() >= 91300);
    if (native) {
      // Without sinks, or with cuDNN's own sink token, the core needs no LSE
      // (bench/notes/attention.md).
      Tensor o = out.dtype() == q.dtype() ? out : c.empty(q.shape(), q.dtype());
      cudnn_core(c, q, k, v, scale, seg, sinks, o);
      if (gate || o.raw() != out.raw()) {
        const Tensor y =
            ::avdit::cuda::sink_gate(c.dev(), o, {}, nullptr, gate, nullptr, out.dtype());
        if (y.raw() != out.raw()) ops::copy_(c, out, y);
      }
      return true;
    }
    // Sinks on an older cuDNN: one ragged graph over all documents returning the LSE, then the
    // exact sink correction and the gate in one pass.
    SdpaOut r = cudnn_sdpa(c.dev(), q, k, v, scale, seg.cu_ctx, nullptr, nullptr, true, 0, seg.causal);
    const Tensor y =
        ::avdit::cuda::sink_gate(c.dev(), r.o, r.lse, sinks, gate, nullptr, out.dtype());
    ops::copy_(c, out, y);
    return true;
  } catch (const RuntimeFailure& e) {
    log::warn("cuDNN attention refused [{}, {}, {}] {}: {}; using the portable kernel", q.size(0),
              q.size(1), q.size(2), dtype_name(q.dtype()), e.what());
    return false;
  }
}

// Whether the Own plan's kernel can serve this attention (what windowed_attention_tc_takes asks
// of the operands, known before they exist).
bool own_serves(CudaContext& c, int64_t head_dim, DType dtype) {
  return ::avdit::cuda::windowed_attention_tc_device(c.dev().props()) && dtype == DType::BF16 &&
         head_dim == ::avdit::cuda::kWindowTcHeadDim;
}

// The untimed default: Own where the longest document is long. cuDNN's SDPA slows down at lengths
// that are not a multiple of 128 rows and the Own kernel does not, so it leads from 32,768 rows
// there; at multiples of 128 it leads from 65,536 (1.02-1.03x cuDNN at 65,536 and 131,072); on
// short documents its fixed cost a block loses (bench/notes/attention.md has the measurements).
constexpr int64_t kOwnMinRows = 32768, kOwnMinRowsAligned = 65536;
bool own_pays(const std::vector<int64_t>& cu) {
  int64_t longest = 0;
  for (size_t i = 0; i + 1 < cu.size(); ++i) longest = std::max(longest, cu[i + 1] - cu[i]);
  return longest >= (longest % 128 != 0 ? kOwnMinRows : kOwnMinRowsAligned);
}

}  // namespace

Segments plan_segments(CudaContext& c, std::vector<int64_t> cu, int64_t heads, int64_t head_dim,
                       DType dtype) {
  if (c.segment_plan()) return make_plan(c, cu, *c.segment_plan());
  const int64_t S = cu.back();
  const bool own = own_serves(c, head_dim, dtype);
  SegmentPlan plan = own && own_pays(cu) ? SegmentPlan::Own : SegmentPlan::Split;
  const bool timed = c.timed_segments() && !c.capturing() && heads > 0 && head_dim > 0 &&
                     dtype != DType::F32 && S >= 4096 && cu.size() > 2 && cu[1] > 0;
  if (timed) {
    auto it = c.segment_choices().find(cu);
    if (it != c.segment_choices().end()) {
      plan = it->second;
    } else {
      // Time the plans once on random q, k, v of this shape (no sinks or gate), keep the fastest.
      Tensor q = c.empty({S, heads, head_dim}, dtype), k = c.empty({S, heads, head_dim}, dtype),
             v = c.empty({S, heads, head_dim}, dtype), o = c.empty({S, heads, head_dim}, dtype);
      fill_normal(c, q, 94, 0.f, 1.f);
      fill_normal(c, k, 95, 0.f, 1.f);
      fill_normal(c, v, 96, 0.f, 1.f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      cudaEvent_t e0, e1;
      AVDIT_CUDA_CHECK(cudaEventCreate(&e0));
      AVDIT_CUDA_CHECK(cudaEventCreate(&e1));
      float best_ms = -1;
      std::vector<SegmentPlan> plans = {SegmentPlan::Split, SegmentPlan::Ragged};
      if (own) plans.push_back(SegmentPlan::Own);
      for (SegmentPlan p : plans) {
        const Segments s = make_plan(c, cu, p);
        auto run = [&] {
          return p == SegmentPlan::Own ? via_own(c, q, k, v, scale, s, nullptr, nullptr, o)
                                       : via_cudnn(c, q, k, v, scale, s, nullptr, nullptr, o);
        };
        if (!run()) continue;  // builds the graphs (untimed); a plan that cannot serve is skipped
        AVDIT_CUDA_CHECK(cudaEventRecord(e0, c.stream()));
        for (int r = 0; r < 2; ++r) run();
        AVDIT_CUDA_CHECK(cudaEventRecord(e1, c.stream()));
        AVDIT_CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        AVDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        c.segment_timings().push_back({S, p, ms / 2});
        if (best_ms < 0 || ms < best_ms) best_ms = ms, plan = p;
      }
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      c.segment_choices()[cu] = plan;
    }
  }
  return make_plan(c, cu, plan);
}

Segments plan_segments_as(CudaContext& c, std::vector<int64_t> cu, SegmentPlan plan) {
  return make_plan(c, cu, plan);
}

void attention(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
               const Segments& seg, const Tensor* sinks, const Tensor* gate, Tensor& out) {
  for (const Tensor* t : {&q, &k, &v}) c.require_here(*t, "attention q/k/v");
  AVDIT_CHECK(q.ndim() == 3 && k.ndim() == 3 && v.ndim() == 3,
              "attention: q, k, v must be [S, H, D]");
  const int64_t S = q.size(0), Hq = q.size(1), D = q.size(2), Hkv = k.size(1);
  AVDIT_CHECK(k.size(0) == S && v.size(0) == S && k.size(2) == D && v.size(1) == Hkv &&
                  v.size(2) == D && Hkv > 0 && Hq % Hkv == 0,
              "attention: q {} k {} v {}", q.shape_str(), k.shape_str(), v.shape_str());
  AVDIT_CHECK(seg.rows() == S && seg.cu_ctx.defined(), "attention: segments of {} rows for {} rows",
              seg.rows(), S);
  AVDIT_CHECK(out.numel() == q.numel(), "attention: output {} for q {}", out.shape_str(),
              q.shape_str());
  if (sinks)
    AVDIT_CHECK(sinks->numel() == Hq, "attention: sinks {} for {} heads", sinks->shape_str(), Hq);
  if (gate)
    AVDIT_CHECK(gate->numel() == S * Hq, "attention: gate {} for {} x {}", gate->shape_str(), S,
                Hq);
  if (S == 0) return;
  if (D > ::avdit::cuda::kPortableMaxHeadDim) {  // beyond every flash kernel here: by GEMMs
    AVDIT_REQUIRE(!sinks && !gate && !seg.causal,
                  "attention: head dim {} (> {}) runs by GEMMs on CUDA, without sinks, gate or a "
                  "causal mask",
                  D, ::avdit::cuda::kPortableMaxHeadDim);
    gemm_attention(c, q, k, v, scale, seg.cu, out);
    return;
  }
  if (via_own(c, q, k, v, scale, seg, sinks, gate, out)) return;
  if (q.dtype() != DType::F32 && q.dtype() == k.dtype() && q.dtype() == v.dtype() &&
      via_cudnn(c, q, k, v, scale, seg, sinks, gate, out))
    return;
  ::avdit::cuda::portable_attention(c.dev(), q, k, v, scale, seg.cu_ctx, sinks, gate, out,
                                    seg.causal);
}

}  // namespace avdit::ops::cuda
