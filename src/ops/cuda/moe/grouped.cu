// The Hopper expert path (grouped.h): operand checks, the weight packing into the kernels' layout,
// and the chunking of the fallback's scratch by heads. The kernels are under ops/cuda/sm90/.
#include "ops/cuda/moe/grouped.h"

#include <algorithm>
#include <climits>

#include "ops/cuda/common.cuh"
#include "ops/cuda/moe/grouped_internal.h"
#include "ops/cuda/moe/moe_internal.h"

namespace avdit::cuda::moe {
namespace {

// dst[b][(c*mul + add)][r] = src[b][r][c] as bf16, for src [B, R, C] (a batched transpose through a
// 32 x 33 shared tile: coalesced reads along c, coalesced writes along r). dst rows are R long.
__global__ void transpose_pack_kernel(const void* src, Elt st, int64_t R, int64_t C, int mul,
                                      int add, int64_t dst_batch, __nv_bfloat16* dst) {
  __shared__ float tile[32][33];
  const int64_t b = blockIdx.z, r0 = int64_t(blockIdx.y) * 32, c0 = int64_t(blockIdx.x) * 32;
  const int tx = threadIdx.x, ty = threadIdx.y;  // 32 x 8
  for (int i = ty; i < 32; i += 8) {
    const int64_t r = r0 + i, c = c0 + tx;
    tile[i][tx] = (r < R && c < C) ? load_elt(src, st, (b * R + r) * C + c) : 0.f;
  }
  __syncthreads();
  for (int i = ty; i < 32; i += 8) {
    const int64_t c = c0 + i, r = r0 + tx;
    if (r < R && c < C)
      dst[b * dst_batch + (c * mul + add) * R + r] = __float2bfloat16_rn(tile[tx][i]);
  }
}

// dst[b][(r*mul + add)][c] = src[b][r][c] as bf16 (row copy with an interleaving row map).
__global__ void rows_pack_kernel(const void* src, Elt st, int64_t B, int64_t R, int64_t C, int mul,
                                 int add, int64_t dst_batch, __nv_bfloat16* dst) {
  const int64_t n = B * R * C;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i % C, r = (i / C) % R, b = i / (R * C);
    dst[b * dst_batch + (r * mul + add) * C + c] = __float2bfloat16_rn(load_elt(src, st, i));
  }
}

void transpose_pack(Device& dev, const Tensor& src, int mul, int add, int64_t dst_batch,
                    Tensor& dst) {
  const int64_t B = src.size(0), R = src.size(1), C = src.size(2);
  const dim3 grid(static_cast<unsigned>((C + 31) / 32), static_cast<unsigned>((R + 31) / 32),
                  static_cast<unsigned>(B));
  transpose_pack_kernel<<<grid, dim3(32, 8), 0, dev.stream()>>>(
      src.raw(), elt_of(src, "moe grouped pack"), R, C, mul, add, dst_batch,
      static_cast<__nv_bfloat16*>(device_ptr(dst)));
  AVDIT_CUDA_CHECK_LAUNCH();
}

void rows_pack(Device& dev, const Tensor& src, int mul, int add, int64_t dst_batch, Tensor& dst) {
  const int64_t B = src.size(0), R = src.size(1), C = src.size(2);
  rows_pack_kernel<<<grid_for(B * R * C), kThreads, 0, dev.stream()>>>(
      src.raw(), elt_of(src, "moe grouped pack"), B, R, C, mul, add, dst_batch,
      static_cast<__nv_bfloat16*>(device_ptr(dst)));
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace

GroupedWeights pack_grouped_weights(Device& dev, const ExpertWeights& w, const RouterConfig& cfg) {
  check_config(cfg);
  check_weights(w, cfg);
  const int64_t G = cfg.heads * cfg.experts, D = cfg.head_dim, De = expert_inter(w);
  GroupedWeights p;
  p.inter = De;
  p.gate_up = cuda_empty(dev, {G, 2 * De, D}, DType::BF16);
  if (G == 0 || D == 0 || De == 0) {
    p.down = cuda_empty(dev, {G, D, De}, DType::BF16);
    return p;
  }
  if (w.k_major) {
    // gate, up [G, De, D]: row j -> row 2j / 2j+1.
    rows_pack(dev, w.gate, 2, 0, 2 * De * D, p.gate_up);
    rows_pack(dev, w.up, 2, 1, 2 * De * D, p.gate_up);
    if (w.down.dtype() == DType::BF16) {
      p.down = w.down;  // already [G, D, De] bf16: shared
    } else {
      p.down = cuda_empty(dev, {G, D, De}, DType::BF16);
      rows_pack(dev, w.down, 1, 0, D * De, p.down);
    }
  } else {
    // gate, up [G, D, De] ([in, out]): transposed, column j -> row 2j / 2j+1; down [G, De, D] ->
    // [G, D, De].
    transpose_pack(dev, w.gate, 2, 0, 2 * De * D, p.gate_up);
    transpose_pack(dev, w.up, 2, 1, 2 * De * D, p.gate_up);
    p.down = cuda_empty(dev, {G, D, De}, DType::BF16);
    transpose_pack(dev, w.down, 1, 0, D * De, p.down);
  }
  return p;
}

bool grouped_supported(Device& dev, DType x, const RouterConfig& cfg, int64_t inter, DType out) {
  return grouped_gemm_built() && dev.props().major == 9 && x == DType::BF16 && out == DType::BF16 &&
         cfg.head_dim > 0 && cfg.head_dim % 8 == 0 && inter > 0 && inter % 8 == 0;
}

Tensor grouped_expert_rows(Device& dev, const Tensor& x, const Routing& routing,
                           const Permutation& perm, const GroupedWeights& w,
                           const RouterConfig& cfg, DType out, int64_t scratch_bytes) {
  GroupedOptions opt;
  opt.scratch_bytes = scratch_bytes;
  return grouped_expert_rows(dev, x, routing, perm, w, cfg, out, opt);
}

Tensor grouped_expert_rows(Device& dev, const Tensor& x, const Routing& routing,
                           const Permutation& perm, const GroupedWeights& w,
                           const RouterConfig& cfg, DType out, const GroupedOptions& opt) {
  const int64_t scratch_bytes = opt.scratch_bytes;
  check_config(cfg);
  require_cuda(x, "moe grouped x");
  AVDIT_REQUIRE(x.ndim() == 2 && x.size(1) == cfg.heads * cfg.head_dim,
                "moe grouped x: expected [T, {}], got {}", cfg.heads * cfg.head_dim, x.shape_str());
  const int64_t T = x.size(0), H = cfg.heads, E = cfg.experts, K = cfg.top_k, D = cfg.head_dim,
                De = w.inter;
  const int64_t G = H * E, S = T * H * K;
  require_i32(routing.indices, "moe grouped routing.indices");
  require_cuda(routing.weights, "moe grouped routing.weights");
  AVDIT_REQUIRE(routing.weights.dtype() == DType::F32 && routing.weights.numel() == S,
                "moe grouped routing.weights: expected F32 [{}, {}, {}], got {} {}", T, H, K,
                dtype_name(routing.weights.dtype()), routing.weights.shape_str());
  AVDIT_REQUIRE(perm.sorted_slot.defined() && perm.sorted_slot.numel() == S &&
                    perm.offsets.defined() && perm.offsets.numel() == G + 1,
                "moe grouped: the permutation does not match the routing ({} slots, {} groups)", S,
                G);
  AVDIT_REQUIRE(w.gate_up.defined() && w.down.defined() && w.gate_up.dtype() == DType::BF16 &&
                    w.down.dtype() == DType::BF16,
                "moe grouped weights: expected BF16 packed weights (pack_grouped_weights)");
  AVDIT_REQUIRE(w.gate_up.shape() == Shape({G, 2 * De, D}) && w.down.shape() == Shape({G, D, De}),
                "moe grouped weights: gate_up {} / down {} do not match {} groups, D {}, De {}",
                w.gate_up.shape_str(), w.down.shape_str(), G, D, De);
  AVDIT_REQUIRE(grouped_supported(dev, x.dtype(), cfg, De, out),
                "moe grouped experts: needs a CUTLASS build, an sm_90 GPU, BF16 x and out, "
                "head_dim ({}) and expert "
                "width ({}) multiples of 8",
                D, De);
  AVDIT_REQUIRE(S < INT_MAX, "moe grouped: {} slots overflow the I32 row indices", S);
  Tensor rows = cuda_empty(dev, {S, D}, out);
  if (S == 0) return rows;
  // The fused kernel gathers its rows itself and keeps h on chip: no scratch, every head in one
  // launch. The fallback: whole heads per chunk (every head owns exactly T*K sorted rows, [h*T*K,
  // (h+1)*T*K)), their gathered rows and h in the scratch.
  const bool fused = fused_experts_supported(D, De);
  const int64_t per_head = T * K * (D + De) * 2;
  const int64_t hpc =
      fused ? H : std::clamp<int64_t>(scratch_bytes / std::max<int64_t>(per_head, 1), 1, H);
  Tensor a_buf, h_buf;
  if (!fused) {
    a_buf = cuda_empty(dev, {hpc * T * K, D}, DType::BF16);
    h_buf = cuda_empty(dev, {hpc * T * K, De}, DType::BF16);
  }
  GroupedRun r{};
  r.x = static_cast<const __nv_bfloat16*>(x.raw());
  r.sorted_slot = cptr<int32_t>(perm.sorted_slot);
  r.slot_weight = cptr<float>(routing.weights);
  r.offsets = cptr<int32_t>(perm.offsets);
  r.wgu = static_cast<const __nv_bfloat16*>(w.gate_up.raw());
  r.wd = static_cast<const __nv_bfloat16*>(w.down.raw());
  r.rows = static_cast<__nv_bfloat16*>(device_ptr(rows));
  r.a_buf = fused ? nullptr : static_cast<__nv_bfloat16*>(device_ptr(a_buf));
  r.h_buf = fused ? nullptr : static_cast<__nv_bfloat16*>(device_ptr(h_buf));
  r.T = T;
  r.H = static_cast<int>(H);
  r.E = static_cast<int>(E);
  r.K = static_cast<int>(K);
  r.D = static_cast<int>(D);
  r.De = static_cast<int>(De);
  r.heads_per_chunk = static_cast<int>(hpc);
  r.stage_ms = opt.stage_ms;
  grouped_run_sm90(dev, r);
  return rows;
}

Tensor grouped_expert_rows(Device& dev, const Tensor& x, const Routing& routing,
                           const Permutation& perm, const ExpertWeights& w, const RouterConfig& cfg,
                           DType out) {
  return grouped_expert_rows(dev, x, routing, perm, pack_grouped_weights(dev, w, cfg), cfg, out);
}

Tensor routed_experts(Device& dev, const Tensor& x, const Routing& routing, const GroupedWeights& w,
                      const RouterConfig& cfg, DType out, Tensor* into) {
  AVDIT_REQUIRE(grouped_supported(dev, x.dtype(), cfg, w.inter, out),
                "moe routed_experts (grouped): needs CUTLASS in the build, an sm_90 GPU, BF16 x "
                "and out, head_dim {} "
                "and expert width {} multiples of 8",
                cfg.head_dim, w.inter);
  const Permutation perm =
      permute(dev, routing, cfg, 0);  // no tile table: only sorted_slot and offsets are read
  const Tensor rows = grouped_expert_rows(dev, x, routing, perm, w, cfg, out);
  return combine(dev, rows, routing, perm, cfg, out, into);
}

}  // namespace avdit::cuda::moe
