// conv3d through cuDNN (conv3d_cudnn.h). Our channel-last layout is cuDNN's NDHWC with N = 1 for x
// and y and KTRSC for the weight, so the operands go in as they are; the graph adds the F32 bias
// to the fp32 convolution before its one rounding, the op's definition in ops/conv3d.h.
#include "ops/cuda/conv3d_cudnn.h"

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "ops/rows.h"

#if AVDIT_HAVE_CUDNN
#include <cudnn.h>
#include <cudnn_frontend.h>

#include "ops/cuda/cudnn_handle.h"
#endif

namespace avdit::ops::cuda {

const char* conv3d_path_name(Conv3dPath p) { return p == Conv3dPath::Cudnn ? "cudnn" : "im2col"; }

namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// What cuDNN is not asked about: the reason, or empty when the operands are its to try.
std::string gate(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g,
                 const Tensor& y) {
#if !AVDIT_HAVE_CUDNN
  (void)x, (void)w, (void)bias, (void)g, (void)y;
  return "this avdit was built without cuDNN";
#else
  const DType d = x.dtype();
  if ((d != DType::BF16 && d != DType::F16) || w.dtype() != d)
    // F32 stays on im2col: cuDNN's fp32 convolutions may run in TF32, outside the fp32 bars.
    return fmt::format("x {} and w {} are not both BF16 or both F16", dtype_name(d),
                       dtype_name(w.dtype()));
  if (y.dtype() != DType::BF16 && y.dtype() != DType::F16 && y.dtype() != DType::F32)
    return fmt::format("y is {}", dtype_name(y.dtype()));
  if (g.time_pad == TimePad::Replicate && x.size(0) == 0) return "no frame to replicate";
  if (!aligned16(x.raw()) || !aligned16(w.raw()) || !aligned16(y.raw()))
    return "an operand is not 16-byte aligned";
  (void)bias;  // cast to a fresh (aligned) F32 buffer before it reaches cuDNN
  return {};
#endif
}

}  // namespace

#if AVDIT_HAVE_CUDNN
namespace {

namespace fe = cudnn_frontend;
using ::avdit::cuda::device_ptr;
using ::avdit::cuda::StreamBuffer;

enum Uid : int64_t { kX = 1, kW, kBias, kY };

// cuDNN pads with zeros only: a replicate time pad (TurboVAED) runs on a copy of x with the edge
// frames added in front and behind, and no time pad.
bool replicates(const Conv3dGeometry& g) {
  return g.time_pad == TimePad::Replicate && g.pad_front + g.pad_back > 0;
}

struct GraphKey {
  int64_t T, H, W, Ci, Co, kt, kh, kw;
  int64_t st, sh, sw, pf, pb, pt, pbo, pl, pr;
  DType in, out;
  bool bias;
  auto tie() const {
    return std::tie(T, H, W, Ci, Co, kt, kh, kw, st, sh, sw, pf, pb, pt, pbo, pl, pr, in, out,
                    bias);
  }
  bool operator<(const GraphKey& o) const { return tie() < o.tie(); }
};

struct Entry {
  std::shared_ptr<fe::graph::Graph> graph;  // null: cuDNN refused this key (see error)
  int64_t workspace = 0;
  std::string error;
};

// The convolution graphs of one GPU, beside the GPU's shared cuDNN handle (cudnn_handle.h, the
// handle SDPA uses too); the handle's mutex guards both.
struct CudnnConvContext {
  std::mutex& mu;
  cudnnHandle_t handle;
  std::map<GraphKey, Entry> graphs;
};

CudnnConvContext& context_for(int ordinal) {
  static std::mutex registry_mu;
  static std::map<int, std::unique_ptr<CudnnConvContext>> registry;
  std::lock_guard<std::mutex> lock(registry_mu);
  auto& slot = registry[ordinal];
  if (!slot) {
    ::avdit::cuda::CudnnHandle& h = ::avdit::cuda::cudnn_handle(ordinal);
    slot.reset(new CudnnConvContext{h.mu, h.handle, {}});
  }
  return *slot;
}

fe::DataType_t fe_dtype(DType d) {
  switch (d) {
    case DType::BF16: return fe::DataType_t::BFLOAT16;
    case DType::F16: return fe::DataType_t::HALF;
    default: return fe::DataType_t::FLOAT;
  }
}

// With a replicate time pad the key is that of the padded copy (padded_input): T + the pads
// frames, no time pad.
GraphKey key_of(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g,
                const Tensor& y) {
  const bool rep = replicates(g);
  const int64_t T = x.size(0) + (rep ? g.pad_front + g.pad_back : 0);
  return GraphKey{T,
                  x.size(1),
                  x.size(2),
                  x.size(3),
                  w.size(0),
                  w.size(1),
                  w.size(2),
                  w.size(3),
                  g.stride_t,
                  g.stride_h,
                  g.stride_w,
                  rep ? 0 : g.pad_front,
                  rep ? 0 : g.pad_back,
                  g.pad_top,
                  g.pad_bottom,
                  g.pad_left,
                  g.pad_right,
                  x.dtype(),
                  y.dtype(),
                  bias != nullptr};
}

// x with pad_front copies of its first frame before it and pad_back of its last after it.
Tensor padded_input(CudaContext& c, const Tensor& x, const Conv3dGeometry& g) {
  const int64_t T = x.size(0);
  std::vector<Tensor> parts(static_cast<size_t>(g.pad_front), x.slice_rows(0, 1));
  parts.push_back(x);
  for (int64_t i = 0; i < g.pad_back; ++i) parts.push_back(x.slice_rows(T - 1, T));
  return ops::concat_rows(c, parts);
}

// Builds the graph for `key`; on refusal returns an Entry with the reason.
Entry build(cudnnHandle_t handle, const GraphKey& k) {
  const int64_t To = conv_out_size(k.T, k.pf, k.pb, k.kt, k.st),
                Ho = conv_out_size(k.H, k.pt, k.pbo, k.kh, k.sh),
                Wo = conv_out_size(k.W, k.pl, k.pr, k.kw, k.sw);
  Entry e;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe_dtype(k.in))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // cuDNN names dims in NCDHW order whatever the memory order; the strides say channel-last.
  auto ndhwc = [](int64_t C, int64_t D, int64_t H, int64_t W) {
    return std::vector<int64_t>{D * H * W * C, 1, H * W * C, W * C, C};
  };
  auto X = g->tensor(fe::graph::Tensor_attributes()
                         .set_name("x")
                         .set_uid(kX)
                         .set_dim({1, k.Ci, k.T, k.H, k.W})
                         .set_stride(ndhwc(k.Ci, k.T, k.H, k.W)));
  auto Wt = g->tensor(fe::graph::Tensor_attributes()
                          .set_name("w")
                          .set_uid(kW)
                          .set_dim({k.Co, k.Ci, k.kt, k.kh, k.kw})
                          .set_stride(ndhwc(k.Ci, k.kt, k.kh, k.kw)));
  // Causal time pads are one-sided (pre and post differ); cuDNN takes the two apart.
  auto conv = fe::graph::Conv_fprop_attributes()
                  .set_name("conv")
                  .set_pre_padding({k.pf, k.pt, k.pl})
                  .set_post_padding({k.pb, k.pbo, k.pr})
                  .set_stride({k.st, k.sh, k.sw})
                  .set_dilation({1, 1, 1})
                  .set_compute_data_type(fe::DataType_t::FLOAT);
  auto Y = g->conv_fprop(X, Wt, conv);
  Y->set_dim({1, k.Co, To, Ho, Wo}).set_stride(ndhwc(k.Co, To, Ho, Wo));
  if (k.bias) {
    // The sum stays fp32 (a virtual tensor) until the bias is in: one rounding, to y's dtype.
    Y->set_data_type(fe::DataType_t::FLOAT);
    auto B = g->tensor(fe::graph::Tensor_attributes()
                           .set_name("bias")
                           .set_uid(kBias)
                           .set_dim({1, k.Co, 1, 1, 1})
                           .set_stride({k.Co, 1, 1, 1, 1})
                           .set_data_type(fe::DataType_t::FLOAT));
    auto add = fe::graph::Pointwise_attributes()
                   .set_name("bias_add")
                   .set_mode(fe::PointwiseMode_t::ADD)
                   .set_compute_data_type(fe::DataType_t::FLOAT);
    Y = g->pointwise(Y, B, add);
    Y->set_dim({1, k.Co, To, Ho, Wo}).set_stride(ndhwc(k.Co, To, Ho, Wo));
  }
  Y->set_output(true).set_uid(kY).set_data_type(fe_dtype(k.out));

  auto fail = [&](const char* step, fe::error_t err) {
    e.graph.reset();
    e.error = fmt::format("{}: {}", step, err.get_message());
    return e;
  };
  if (auto err = g->validate(); err.is_bad()) return fail("validate", err);
  if (auto err = g->build_operation_graph(handle); err.is_bad())
    return fail("build_operation_graph", err);
  if (auto err = g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
      err.is_bad())
    return fail("create_execution_plans", err);
  // The bits of a decode must not depend on the run: no engine with atomics or split-K races,
  // and none that reduces in less than fp32.
  g->deselect_numeric_notes(
      {fe::NumericalNote_t::NONDETERMINISTIC, fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION});
  if (auto err = g->check_support(handle); err.is_bad()) return fail("check_support", err);
  if (auto err = g->build_plans(handle); err.is_bad()) return fail("build_plans", err);
  if (auto err = g->get_workspace_size(e.workspace); err.is_bad())
    return fail("get_workspace_size", err);
  e.graph = std::move(g);
  return e;
}

// The cached entry of these operands' key, built on first use (under ctx.mu, which the caller
// holds).
const Entry& entry_for(CudnnConvContext& ctx, const GraphKey& key) {
  auto it = ctx.graphs.find(key);
  if (it == ctx.graphs.end()) {
    Entry e = build(ctx.handle, key);
    if (!e.graph)
      log::warn(
          "cuDNN conv3d refused x [{}, {}, {}, {}] w [{}, {}, {}, {}, {}] {}: {}; it runs on "
          "im2col",
          key.T, key.H, key.W, key.Ci, key.Co, key.kt, key.kh, key.kw, key.Ci, dtype_name(key.in),
          e.error);
    it = ctx.graphs.emplace(key, std::move(e)).first;
  }
  return it->second;
}

}  // namespace

Conv3dPath conv3d_path(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
                       const Conv3dGeometry& g, const Tensor& y, std::string* why) {
  if (std::string reason = gate(x, w, bias, g, y); !reason.empty()) {
    if (why) *why = std::move(reason);
    return Conv3dPath::Im2col;
  }
  CudnnConvContext& ctx = context_for(c.dev().ordinal());
  std::lock_guard<std::mutex> lock(ctx.mu);
  const Entry& e = entry_for(ctx, key_of(x, w, bias, g, y));
  if (!e.graph) {
    if (why) *why = "cuDNN refused the shape: " + e.error;
    return Conv3dPath::Im2col;
  }
  if (why) why->clear();
  return Conv3dPath::Cudnn;
}

bool conv3d_cudnn(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
                  const Conv3dGeometry& g, Tensor& y) {
  if (!gate(x, w, bias, g, y).empty()) return false;
  CudnnConvContext& ctx = context_for(c.dev().ordinal());
  // The F32 bias and a replicate pad's copy of x are made before the lock: a cast or a copy
  // enqueues on the stream, nothing more.
  const Tensor b32 = bias ? ops::cast(c, *bias, DType::F32) : Tensor();
  const Tensor xin = replicates(g) ? padded_input(c, x, g) : x;
  std::lock_guard<std::mutex> lock(ctx.mu);
  const Entry& e = entry_for(ctx, key_of(x, w, bias, g, y));
  if (!e.graph) return false;
  std::unordered_map<int64_t, void*> pack = {
      {kX, device_ptr(xin)}, {kW, device_ptr(w)}, {kY, device_ptr(y)}};
  if (bias) pack[kBias] = device_ptr(b32);
  // The workspace comes from the stream's pool, as every other op's scratch does.
  StreamBuffer workspace(c.stream(), static_cast<size_t>(e.workspace));
  const cudnnStatus_t st = cudnnSetStream(ctx.handle, c.stream());
  if (st != CUDNN_STATUS_SUCCESS)
    throw RuntimeFailure(fmt::format("cudnnSetStream: {}", cudnnGetErrorString(st)));
  if (auto err = e.graph->execute(ctx.handle, pack, workspace.p); err.is_bad())
    throw RuntimeFailure(fmt::format("cuDNN conv3d execute (x {} w {}): {}", x.shape_str(),
                                     w.shape_str(), err.get_message()));
  return true;
}

#else  // no cuDNN in this build

Conv3dPath conv3d_path(CudaContext&, const Tensor& x, const Tensor& w, const Tensor* bias,
                       const Conv3dGeometry& g, const Tensor& y, std::string* why) {
  if (why) *why = gate(x, w, bias, g, y);
  return Conv3dPath::Im2col;
}

bool conv3d_cudnn(CudaContext&, const Tensor&, const Tensor&, const Tensor*, const Conv3dGeometry&,
                  Tensor&) {
  return false;
}

#endif

}  // namespace avdit::ops::cuda
