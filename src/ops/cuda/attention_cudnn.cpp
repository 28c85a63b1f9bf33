// cuDNN SDPA for cuda::attention and cuda::attention_fp8: one cudnn-frontend graph per (shape,
// dtype, options), built on first use and kept, executed on the Device's stream. The only file that
// includes the (slow to compile) cudnn-frontend headers.
#include "ops/cuda/attention_cudnn.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "core/error.h"
#include "core/log.h"

#if AVDIT_HAVE_CUDNN
#include <cudnn.h>
#include <cudnn_frontend.h>

#include "ops/cuda/cudnn_handle.h"
#endif

namespace avdit::cuda {

#if AVDIT_HAVE_CUDNN
namespace {

namespace fe = cudnn_frontend;

// Tensor ids of the variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kSeqQ, kSeqKv, kOffQ, kOffK, kOffV, kOffO, kOffStats, kSink,
                     kDescaleQ, kDescaleK, kDescaleV, kDescaleS, kScaleS, kScaleO, kAmaxS, kAmaxO };

struct GraphKey {
  int64_t b, s, hq, hkv, d;
  int64_t s_max;  // the graph's sequence dim: s, or (ragged) the caller's longest segment
  DType dtype;     // F8_E4M3: the FP8 graph (cudnn_sdpa_fp8)
  bool ragged;
  uint32_t scale_bits;
  bool stats, native_sink;
  bool causal;  // top-left per sequence: q and kv of a segment have the same length
  auto tie() const {
    return std::tie(b, s, s_max, hq, hkv, d, dtype, ragged, scale_bits, stats, native_sink, causal);
  }
  bool operator<(const GraphKey& o) const { return tie() < o.tie(); }
};

struct Entry {
  std::shared_ptr<fe::graph::Graph> graph;  // null: cuDNN refused this key (see error)
  int64_t workspace = 0;
  bool stats_token_major = true;
  std::string error;
};

// One cuDNN handle and graph cache per GPU. cuDNN handles belong to a CUDA context, not a stream,
// so all Devices of one GPU share them and each call binds the caller's stream under the lock.
// This is process-wide state (the Device class has no slot for it yet); it holds no stream and no
// memory that a Device owns, so a Device may come and go freely.
// The graphs of one GPU, beside the GPU's shared handle (cudnn_handle.h); its mutex guards both.
struct CudnnContext {
  std::mutex& mu;
  cudnnHandle_t handle;
  std::map<GraphKey, Entry> graphs;
};

CudnnContext& context_for(int ordinal) {
  static std::mutex registry_mu;
  static std::map<int, std::unique_ptr<CudnnContext>> registry;
  std::lock_guard<std::mutex> lock(registry_mu);
  auto& slot = registry[ordinal];
  if (!slot) {
    CudnnHandle& h = cudnn_handle(ordinal);
    slot.reset(new CudnnContext{h.mu, h.handle, {}});
  }
  return *slot;
}

fe::DataType_t fe_dtype(DType d) { return d == DType::BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF; }

// Validates g and builds its plans into e; on refusal returns e without a graph and with the reason.
// deterministic: engines cuDNN marks NONDETERMINISTIC are left out (the FP8 graphs: at 56 heads and
// 2,048 rows cuDNN 9.14's first FP8 plan gave different bytes on two calls).
Entry finish(std::shared_ptr<fe::graph::Graph> g, cudnnHandle_t handle, Entry e, bool deterministic = false) {
  auto fail = [&](const char* step, fe::error_t err) {
    e.graph.reset();
    e.error = fmt::format("{}: {}", step, err.get_message());
    return e;
  };
  if (auto err = g->validate(); err.is_bad()) return fail("validate", err);
  if (auto err = g->build_operation_graph(handle); err.is_bad()) return fail("build_operation_graph", err);
  if (auto err = g->create_execution_plans({fe::HeurMode_t::A}); err.is_bad())
    return fail("create_execution_plans", err);
  if (deterministic) g->deselect_numeric_notes({fe::NumericalNote_t::NONDETERMINISTIC});
  if (auto err = g->check_support(handle); err.is_bad()) return fail("check_support", err);
  if (auto err = g->build_plans(handle); err.is_bad()) return fail("build_plans", err);
  if (auto err = g->get_workspace_size(e.workspace); err.is_bad()) return fail("get_workspace_size", err);
  e.graph = std::move(g);
  return e;
}

// Our [S, H, D] token-major layout is cuDNN's BSHD: dims {B, H, S, D}, strides {S H D, D, H D, 1}.
std::shared_ptr<fe::graph::Tensor_attributes> bshd(fe::graph::Graph& g, const char* name, int64_t uid, int64_t B,
                                                   int64_t H, int64_t S, int64_t D) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({B, H, S, D})
                      .set_stride({S * H * D, D, H * D, 1}));
}

// The ragged (THD) inputs of a graph over B segments: offsets of Q, K, V (and returned, O's and the
// stats'), the per-segment lengths and the padding mask that keeps each segment to itself.
std::pair<std::shared_ptr<fe::graph::Tensor_attributes>, std::shared_ptr<fe::graph::Tensor_attributes>> set_ragged(
    fe::graph::Graph& g, int64_t B, fe::graph::Tensor_attributes& Q, fe::graph::Tensor_attributes& K,
    fe::graph::Tensor_attributes& V, fe::graph::SDPA_attributes& opts) {
  auto i32 = [&](const char* name, int64_t uid, int64_t n) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({n, 1, 1, 1})
                        .set_stride({1, 1, 1, 1})
                        .set_data_type(fe::DataType_t::INT32));
  };
  Q.set_ragged_offset(i32("off_q", kOffQ, B + 1));
  K.set_ragged_offset(i32("off_k", kOffK, B + 1));
  V.set_ragged_offset(i32("off_v", kOffV, B + 1));
  opts.set_padding_mask(true).set_seq_len_q(i32("seq_q", kSeqQ, B)).set_seq_len_kv(i32("seq_kv", kSeqKv, B));
  return {i32("off_o", kOffO, B + 1), i32("off_stats", kOffStats, B + 1)};
}

// Builds the graph for `key`; on refusal returns an Entry with the reason.
Entry build(cudnnHandle_t handle, const GraphKey& key, float scale) {
  // S: the graph's sequence dim (ragged: the longest segment; the rows in memory are addressed
  // through the ragged offsets, so only the per-token strides matter there).
  const int64_t B = key.b, S = key.s_max, Hq = key.hq, Hkv = key.hkv, D = key.d;
  Entry e;
  // cuDNN before 9.12 writes a non-ragged Stats in packed [B, H, S] order whatever its strides; from
  // 9.12 on it honours them, and [S, H] (token-major, the gate's order) makes the post-pass coalesced.
  e.stats_token_major = key.ragged || cudnnGetVersion() >= 91200;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe_dtype(key.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto Q = bshd(*g, "Q", kQ, B, Hq, S, D), K = bshd(*g, "K", kK, B, Hkv, S, D), V = bshd(*g, "V", kV, B, Hkv, S, D);
  auto opts = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(key.stats).set_attn_scale(scale);
  if (key.native_sink)  // cuDNN >= 9.13 adds exp(sink_h) to the denominator itself
    opts.set_sink_token(g->tensor(fe::graph::Tensor_attributes()
                                      .set_name("sink")
                                      .set_uid(kSink)
                                      .set_dim({1, Hq, 1, 1})
                                      .set_stride({Hq, 1, 1, 1})
                                      .set_data_type(fe::DataType_t::FLOAT)));
  if (key.causal)  // query i of a segment sees its keys j <= i
    opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  std::shared_ptr<fe::graph::Tensor_attributes> off_o, off_stats;
  if (key.ragged) std::tie(off_o, off_stats) = set_ragged(*g, B, *Q, *K, *V, opts);
  auto [O, Stats] = g->sdpa(Q, K, V, opts);
  O->set_output(true).set_uid(kO).set_dim({B, Hq, S, D}).set_stride({S * Hq * D, D, Hq * D, 1});
  if (off_o) O->set_ragged_offset(off_o);
  if (key.stats) {
    Stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim({B, Hq, S, 1});
    if (e.stats_token_major)
      Stats->set_stride({S * Hq, 1, Hq, 1});
    else
      Stats->set_stride({Hq * S, S, 1, 1});
    if (off_stats) Stats->set_ragged_offset(off_stats);
  }

  return finish(std::move(g), handle, std::move(e));
}

}  // namespace

int cudnn_version() { return static_cast<int>(cudnnGetVersion()); }

bool cudnn_attention_available(const Device& dev, const Tensor& q, const Tensor& k, const Tensor& v) {
  if (!q.defined() || !k.defined() || !v.defined()) return false;
  if (q.device() != avdit::Device::CUDA || k.device() != avdit::Device::CUDA || v.device() != avdit::Device::CUDA)
    return false;
  if (q.ndim() != 3 || k.ndim() != 3 || v.ndim() != 3) return false;
  const DType dt = q.dtype();
  if ((dt != DType::BF16 && dt != DType::F16) || k.dtype() != dt || v.dtype() != dt) return false;
  const int sm = dev.props().major * 10 + dev.props().minor;
  const int64_t D = q.size(2);
  if (sm < 80 || D % 8 != 0 || D > (sm < 90 ? 128 : 256)) return false;
  return k.size(1) > 0 && q.size(1) % k.size(1) == 0;
}

namespace {

// The graph of `key` from the GPU's cache, built on first use (`build_fn`); a refusal is logged once
// and kept (Entry without a graph). Called with ctx.mu held.
template <class Build>
const Entry& graph_for(CudnnContext& ctx, const GraphKey& key, const char* what, Build build_fn) {
  auto it = ctx.graphs.find(key);
  if (it == ctx.graphs.end()) {
    Entry e = build_fn();
    if (!e.graph)
      log::warn("cuDNN {} refused S={} heads {}/{} D={} {}{}{}: {}", what, key.s, key.hq, key.hkv, key.d,
                dtype_name(key.dtype), key.ragged ? " (segments)" : "", key.causal ? " causal" : "", e.error);
    it = ctx.graphs.emplace(key, std::move(e)).first;
  }
  return it->second;
}

// Runs e's graph on dev's stream with `pack`, adding the ragged lengths and offsets computed on the
// device from cu_seqlens (when defined; q_row / kv_row elements per token) and the workspace.
// Called with ctx.mu held.
// zero_workspace: the FP8 graphs' workspace starts at zeros rather than at what the pool held before
// (one candidate for the FP8 defect of bench/notes/attention_fp8.md; a memset of it costs little).
void execute(Device& dev, CudnnContext& ctx, const Entry& e, std::unordered_map<int64_t, void*>& pack,
             const Tensor& cu_seqlens, int64_t q_row, int64_t kv_row, int64_t Hq, bool zero_workspace = false) {
  const bool ragged = cu_seqlens.defined();
  const int64_t B = ragged ? cu_seqlens.numel() - 1 : 1;
  // Lengths and offsets: 4 int32 arrays, 256-byte aligned, filled on the device.
  const int64_t stride = (B + 1 + 63) / 64 * 64;
  StreamBuffer offsets(dev.stream(), ragged ? static_cast<size_t>(4 * stride) * sizeof(int32_t) : 0);
  if (ragged) {
    auto* p = static_cast<int32_t*>(offsets.p);
    launch_ragged_offsets(dev, cu_seqlens, q_row, kv_row, Hq, p, stride);
    pack[kSeqQ] = p;
    pack[kSeqKv] = p;
    pack[kOffQ] = p + stride;
    pack[kOffO] = p + stride;
    pack[kOffK] = p + 2 * stride;
    pack[kOffV] = p + 2 * stride;
    pack[kOffStats] = p + 3 * stride;
  }
  StreamBuffer workspace(dev.stream(), static_cast<size_t>(e.workspace));
  if (zero_workspace && e.workspace > 0)
    AVDIT_CUDA_CHECK(cudaMemsetAsync(workspace.p, 0, static_cast<size_t>(e.workspace), dev.stream()));
  const cudnnStatus_t st = cudnnSetStream(ctx.handle, dev.stream());
  if (st != CUDNN_STATUS_SUCCESS) throw RuntimeFailure(fmt::format("cudnnSetStream: {}", cudnnGetErrorString(st)));
  if (auto err = e.graph->execute(ctx.handle, pack, workspace.p); err.is_bad())
    throw RuntimeFailure(fmt::format("cuDNN SDPA execute: {}", err.get_message()));
}

// Segments from cu_seqlens (undefined: one), BadInput for a malformed one; *too_big when the rows
// exceed the int32 element offsets of the ragged layout.
int64_t segment_count(const Tensor& cu_seqlens, int64_t S, int64_t row_elems, bool* too_big) {
  *too_big = false;
  if (!cu_seqlens.defined()) return 1;
  require_cuda(cu_seqlens, "attention cu_seqlens");
  AVDIT_REQUIRE(cu_seqlens.dtype() == DType::I32 && cu_seqlens.numel() >= 2,
                "attention: cu_seqlens must be I32 with at least 2 entries, got {} {}", cu_seqlens.shape_str(),
                dtype_name(cu_seqlens.dtype()));
  *too_big = S * row_elems >= (int64_t{1} << 31);  // ragged offsets are int32 element offsets
  return cu_seqlens.numel() - 1;
}

// cudnn_sdpa; when cuDNN refuses the configuration, sets *refused (if given) instead of throwing.
SdpaOut sdpa_impl(Device& dev, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                  const Tensor& cu_seqlens, const SdpaOut* into, const Tensor* native_sinks, bool stats,
                  bool* refused, int64_t max_seqlen, bool causal) {
  AVDIT_REQUIRE(cudnn_attention_available(dev, q, k, v),
                "cudnn_sdpa: q {} {}, k {} {}, v {} {} not supported (BF16/F16 on the device, one dtype, D % 8 == 0)",
                q.shape_str(), dtype_name(q.dtype()), k.shape_str(), dtype_name(k.dtype()), v.shape_str(),
                dtype_name(v.dtype()));
  const int64_t S = q.size(0), Hq = q.size(1), D = q.size(2), Hkv = k.size(1);
  AVDIT_REQUIRE(k.size(0) == S && v.size(0) == S && k.size(2) == D && v.size(1) == Hkv && v.size(2) == D,
                "cudnn_sdpa: q {} k {} v {}", q.shape_str(), k.shape_str(), v.shape_str());
  const bool ragged = cu_seqlens.defined();
  bool too_big = false;
  const int64_t B = segment_count(cu_seqlens, S, Hq * D, &too_big);
  if (too_big) {
    if (refused) {
      *refused = true;
      return {};
    }
    throw RuntimeFailure(fmt::format("cudnn_sdpa: {} x {} x {} elements exceed int32 ragged offsets", S, Hq, D));
  }
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, sizeof scale);
  if (native_sinks) {
    require_cuda(*native_sinks, "cudnn_sdpa sinks");
    AVDIT_REQUIRE(native_sinks->dtype() == DType::F32 && native_sinks->numel() == Hq,
                  "cudnn_sdpa: sinks {} {} must be F32 [{}]", native_sinks->shape_str(),
                  dtype_name(native_sinks->dtype()), Hq);
  }
  AVDIT_REQUIRE(max_seqlen >= 0 && max_seqlen <= S && (ragged || max_seqlen == 0 || max_seqlen == S),
                "cudnn_sdpa: max_seqlen {} for {} rows ({})", max_seqlen, S, ragged ? "segments" : "one sequence");
  const int64_t s_max = max_seqlen > 0 ? max_seqlen : S;
  const GraphKey key{B, S, Hq, Hkv, D, s_max, q.dtype(), ragged, scale_bits, stats, native_sinks != nullptr,
                     causal};

  CudnnContext& ctx = context_for(dev.ordinal());
  std::lock_guard<std::mutex> lock(ctx.mu);
  const Entry& e = graph_for(ctx, key, "SDPA", [&] { return build(ctx.handle, key, scale); });
  if (!e.graph && refused) {
    *refused = true;
    return {};
  }
  if (!e.graph) throw RuntimeFailure(fmt::format("cuDNN SDPA not available for this shape: {}", e.error));

  SdpaOut r;
  const Shape lse_shape = e.stats_token_major ? Shape{S, Hq} : Shape{Hq, S};
  if (into) {
    require_cuda(into->o, "cudnn_sdpa output o");
    AVDIT_REQUIRE(into->o.shape() == q.shape() && into->o.dtype() == q.dtype(), "cudnn_sdpa: output o {} does not fit q {}",
                  into->o.shape_str(), q.shape_str());
    r.o = into->o;
    if (stats) {
      require_cuda(into->lse.lse, "cudnn_sdpa output lse");
      AVDIT_REQUIRE(into->lse.lse.dtype() == DType::F32 && into->lse.lse.numel() == S * Hq,
                    "cudnn_sdpa: output lse {} is not F32 with {} x {} elements", into->lse.lse.shape_str(), S, Hq);
      r.lse.lse = into->lse.lse.reshape(lse_shape);
    }
  } else {
    r.o = cuda_empty(dev, {S, Hq, D}, q.dtype());
    if (stats) r.lse.lse = cuda_empty(dev, lse_shape, DType::F32);
  }
  r.lse.stride_s = e.stats_token_major ? Hq : 1;
  r.lse.stride_h = e.stats_token_major ? 1 : S;
  if (S == 0) return r;

  std::unordered_map<int64_t, void*> pack = {
      {kQ, device_ptr(q)}, {kK, device_ptr(k)}, {kV, device_ptr(v)}, {kO, device_ptr(r.o)}};
  if (stats) pack[kStats] = device_ptr(r.lse.lse);
  if (native_sinks) pack[kSink] = device_ptr(*native_sinks);
  execute(dev, ctx, e, pack, cu_seqlens, Hq * D, Hkv * D, Hq);
  return r;
}

// The FP8 graph for `key`: e4m3 Q, K, V and O, the six F32 scalar scales, the two amax outputs
// (required by the graph, unused here), and token-major stats when key.stats.
Entry build_fp8(cudnnHandle_t handle, const GraphKey& key, float scale) {
  const int64_t B = key.b, S = key.s_max, Hq = key.hq, Hkv = key.hkv, D = key.d;
  Entry e;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::FP8_E4M3)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto Q = bshd(*g, "Q", kQ, B, Hq, S, D), K = bshd(*g, "K", kK, B, Hkv, S, D), V = bshd(*g, "V", kV, B, Hkv, S, D);
  auto scalar = [&](const char* name, int64_t uid) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim({1, 1, 1, 1})
                         .set_stride({1, 1, 1, 1})
                         .set_data_type(fe::DataType_t::FLOAT));
  };
  auto opts =
      fe::graph::SDPA_fp8_attributes().set_name("sdpa_fp8").set_generate_stats(key.stats).set_attn_scale(scale);
  if (key.causal)
    opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  std::shared_ptr<fe::graph::Tensor_attributes> off_o, off_stats;
  if (key.ragged) std::tie(off_o, off_stats) = set_ragged(*g, B, *Q, *K, *V, opts);
  auto [O, Stats, Amax_S, Amax_O] =
      g->sdpa_fp8(Q, K, V, scalar("descale_q", kDescaleQ), scalar("descale_k", kDescaleK),
                  scalar("descale_v", kDescaleV), scalar("descale_s", kDescaleS), scalar("scale_s", kScaleS),
                  scalar("scale_o", kScaleO), opts);
  if (key.stats) {
    Stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim({B, Hq, S, 1});
    Stats->set_stride({S * Hq, 1, Hq, 1});
    if (off_stats) Stats->set_ragged_offset(off_stats);
  }
  O->set_output(true)
      .set_uid(kO)
      .set_data_type(fe::DataType_t::FP8_E4M3)
      .set_dim({B, Hq, S, D})
      .set_stride({S * Hq * D, D, Hq * D, 1});
  if (off_o) O->set_ragged_offset(off_o);
  for (auto& [t, uid] : {std::pair{Amax_S, kAmaxS}, std::pair{Amax_O, kAmaxO}})
    t->set_output(true).set_uid(uid).set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(
        fe::DataType_t::FLOAT);
  return finish(std::move(g), handle, std::move(e), /*deterministic=*/true);
}

}  // namespace

SdpaOut cudnn_sdpa(Device& dev, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                   const Tensor& cu_seqlens, const SdpaOut* into, const Tensor* native_sinks, bool stats,
                   int64_t max_seqlen, bool causal) {
  return sdpa_impl(dev, q, k, v, scale, cu_seqlens, into, native_sinks, stats, nullptr, max_seqlen, causal);
}

bool cudnn_fp8_attention_available(const Device& dev) {
  const int v = cudnn_version();
  return dev.props().major >= 9 && v >= 90100 && v != 91000;  // cudnn-frontend's own FP8 limits
}

bool cudnn_sdpa_fp8(Device& dev, const SdpaFp8In& in, float scale, Tensor& o, const Tensor& cu_seqlens,
                    int64_t max_seqlen, bool causal, const Tensor& stats) {
  AVDIT_REQUIRE(cudnn_fp8_attention_available(dev),
                "cuDNN's FP8 attention needs sm_90 or newer and cuDNN >= 9.1 (not 9.10); this is sm_{}{} with "
                "cuDNN {}: run the attention in bf16",
                dev.props().major, dev.props().minor, cudnn_version());
  const Tensor &q = in.q, &k = in.k, &v = in.v, &o_in = o;
  for (const Tensor* t : {&q, &k, &v, &o_in}) {
    require_cuda(*t, "cudnn_sdpa_fp8 q/k/v/o");
    AVDIT_REQUIRE(t->dtype() == DType::F8_E4M3 && t->ndim() == 3, "cudnn_sdpa_fp8: q, k, v, o must be F8_E4M3 "
                  "[S, H, D], found {} {}", dtype_name(t->dtype()), t->shape_str());
  }
  for (const Tensor* t : {&in.descale_q, &in.descale_k, &in.descale_v, &in.descale_s, &in.scale_s, &in.scale_o}) {
    require_cuda(*t, "cudnn_sdpa_fp8 scale");
    AVDIT_REQUIRE(t->dtype() == DType::F32 && t->numel() == 1, "cudnn_sdpa_fp8: scales must be F32 [1], found {} {}",
                  dtype_name(t->dtype()), t->shape_str());
  }
  const int64_t S = q.size(0), Hq = q.size(1), D = q.size(2), Hkv = k.size(1);
  AVDIT_REQUIRE(k.size(0) == S && v.size(0) == S && k.size(2) == D && v.size(1) == Hkv && v.size(2) == D &&
                    Hkv > 0 && Hq % Hkv == 0 && o.shape() == q.shape(),
                "cudnn_sdpa_fp8: q {} k {} v {} o {}", q.shape_str(), k.shape_str(), v.shape_str(), o.shape_str());
  AVDIT_REQUIRE(D % 16 == 0 && D <= 256, "cudnn_sdpa_fp8: head dim {} is not a multiple of 16 up to 256", D);
  const bool ragged = cu_seqlens.defined();
  bool too_big = false;
  const int64_t B = segment_count(cu_seqlens, S, Hq * D, &too_big);
  if (too_big) return false;
  AVDIT_REQUIRE(max_seqlen >= 0 && max_seqlen <= S && (ragged || max_seqlen == 0 || max_seqlen == S),
                "cudnn_sdpa_fp8: max_seqlen {} for {} rows ({})", max_seqlen, S, ragged ? "segments" : "one sequence");
  const bool want_stats = stats.defined();
  if (want_stats) {
    require_cuda(stats, "cudnn_sdpa_fp8 stats");
    AVDIT_REQUIRE(stats.dtype() == DType::F32 && stats.numel() == S * Hq,
                  "cudnn_sdpa_fp8: stats {} {} must be F32 with {} x {} elements", stats.shape_str(),
                  dtype_name(stats.dtype()), S, Hq);
    if (!ragged && cudnn_version() < 91200) return false;  // dense stats in packed [B, H, S] order only
  }
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, sizeof scale);
  const GraphKey key{B, S, Hq, Hkv, D, max_seqlen > 0 ? max_seqlen : S, DType::F8_E4M3, ragged, scale_bits,
                     want_stats, false, causal};
  CudnnContext& ctx = context_for(dev.ordinal());
  std::lock_guard<std::mutex> lock(ctx.mu);
  const Entry& e = graph_for(ctx, key, "FP8 SDPA", [&] { return build_fp8(ctx.handle, key, scale); });
  if (!e.graph) return false;
  if (S == 0) return true;
  // The amax outputs: two floats, each in its own 16-byte slot (zeroed: defined if read).
  StreamBuffer amax(dev.stream(), 2 * 16);
  AVDIT_CUDA_CHECK(cudaMemsetAsync(amax.p, 0, 2 * 16, dev.stream()));
  std::unordered_map<int64_t, void*> pack = {
      {kQ, device_ptr(q)},
      {kK, device_ptr(k)},
      {kV, device_ptr(v)},
      {kO, device_ptr(o)},
      {kDescaleQ, device_ptr(in.descale_q)},
      {kDescaleK, device_ptr(in.descale_k)},
      {kDescaleV, device_ptr(in.descale_v)},
      {kDescaleS, device_ptr(in.descale_s)},
      {kScaleS, device_ptr(in.scale_s)},
      {kScaleO, device_ptr(in.scale_o)},
      {kAmaxS, amax.p},
      {kAmaxO, static_cast<char*>(amax.p) + 16}};
  if (want_stats) pack[kStats] = device_ptr(stats);
  execute(dev, ctx, e, pack, cu_seqlens, Hq * D, Hkv * D, Hq, /*zero_workspace=*/true);
  return true;
}

#else  // no cuDNN in this build

int cudnn_version() { return 0; }

bool cudnn_attention_available(const Device&, const Tensor&, const Tensor&, const Tensor&) { return false; }

SdpaOut cudnn_sdpa(Device&, const Tensor&, const Tensor&, const Tensor&, float, const Tensor&, const SdpaOut*, const Tensor*,
                   bool, int64_t, bool) {
  throw RuntimeFailure("cudnn_sdpa: this avdit was built without cuDNN");
}

bool cudnn_fp8_attention_available(const Device&) { return false; }

bool cudnn_sdpa_fp8(Device&, const SdpaFp8In&, float, Tensor&, const Tensor&, int64_t, bool, const Tensor&) {
  throw BadInput("FP8 attention: this avdit was built without cuDNN (its FP8 SDPA is the only FP8 kernel); run "
                 "the attention in bf16");
}

#endif

}  // namespace avdit::cuda
