// `avdit bench moe`: the MAGI-2 MoE MLP sub-layer of the preview on the GPU in bf16 - pre-norm
// ((1 + w) RMSNorm per modality, eps 1e-6), split linear, the multi-head router (fp32 logits, sigmoid +
// expert_bias, top-6 of 256 per head, L1 norm x route_scale), the routed experts (swiglu7, 256 -> 1280
// -> 256), the combine, the merge linear, the shared expert and the per-modality shared experts
// (swiglu7 on interleaved channels) - at T tokens, with random weights made on the GPU and skewed
// expert loads (a hot set of experts per head through expert_bias, max/mean tokens per expert ~3,
// measured and printed). Per-stage times with CUDA events (median of --iters runs), TFLOP/s and the
// fraction of the card's 770 TFLOP/s bf16 ceiling. --dump-check FILE writes a small-shape run
// (weights, inputs, outputs) for bench/peers/moe_peer.py to check itself against before it times.
// Correctness of the routed experts against the CPU: tests/gpu/moe_cuda_test.cpp (not re-run here).
#include "bench_commands.h"

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

#if AVDIT_HAVE_CUDA
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>
#include <functional>
#include <vector>

#include "backend/cuda/models/magi2/gemm.h"
#include "backend/cuda/moe/grouped.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/cuda/timer.h"
#include "bench/report.h"
#include "io/safetensors.h"

// The GPU NVFP4 dequantiser (issue 8) is timed with --nvfp4 when its implementation is linked in.
#ifndef AVDIT_MOE_BENCH_NVFP4
#define AVDIT_MOE_BENCH_NVFP4 1  // src/backend/cuda/nvfp4_dequant.cu is in the tree
#endif
#if AVDIT_MOE_BENCH_NVFP4
#include "backend/cuda/nvfp4.h"
#endif
#endif

namespace avdit::app {
namespace {

struct Options {
  std::vector<int64_t> tokens = {16384, 65536, 131072};
  int warmup = 2, iters = 10;
  std::string json, dump_check, path = "auto";
  bool nvfp4 = false;
  bool clock = false;       // NVML sampling of the SM clock and power (off: it perturbs the times)
  int grouped_kernel = -1;  // --path grouped: GroupedOptions::kernel (grouped.h); -1: its default
  int router_topk = 2;      // RouterConfig::topk_version
  int router_copies = 0;    // --router-copies: the router's placement test (router_placement below)
};

}  // namespace

#if AVDIT_HAVE_CUDA
namespace {

using namespace avdit::cuda;
using avdit::cuda::magi2::gemm_rows;
constexpr double kCeilingTflops = 770.0;  // measured bf16 GEMM ceiling of the H200 (TARGETS.md)

struct LayerShape {
  int64_t hidden = 3072, W = 3072, H = 12, E = 256, K = 6, D = 256, De = 1280, Is = 1280, Im = 1280;
  float route_scale = 4.9f;
  int topk_version = 2;  // --router-topk
  moe::RouterConfig router() const { return moe::RouterConfig{H, E, K, D, false, true, route_scale, topk_version}; }
};

struct LayerWeights {
  Tensor pre_norm;            // [3, hidden] F32, used as (1 + w)
  Tensor split, merge;        // [W, hidden], [hidden, W] BF16
  Tensor gate, bias;          // [H*E, D], [H*E] F32
  moe::ExpertWeights ex;      // BF16 [in, out]
  Tensor shared_fc1, shared_fc2;  // [2*Is, hidden] (rows interleaved gate/linear), [hidden, Is]
  Tensor ms_fc1, ms_fc2;          // [3*2*Im, hidden], [3*hidden, Im]
  Tensor merge_shared;            // [hidden, W + Is]: merge | shared_fc2 side by side (the model's layout)
};

Tensor filled(cuda::Device& dev, Shape shape, DType dt, float a, uint64_t seed) {
  Tensor t = cuda_empty(dev, std::move(shape), dt);
  moe::fill_uniform(dev, t, -a, a, seed);
  return t;
}

// Uniform weights with the variance of a 1/sqrt(fan_in) init, so activations stay O(1); the router
// bias makes 32 experts per head "hot" (bias 0.07 x (1 - rank/32), a different set per head), which
// gives max/mean tokens per expert ~3 (simulated on N(0,1) logits; the run prints the measured ratio).
LayerWeights make_weights(cuda::Device& dev, const LayerShape& s, uint64_t seed) {
  auto u = [](int64_t fan_in) { return std::sqrt(3.0f / float(fan_in)); };
  LayerWeights w;
  w.pre_norm = filled(dev, {3, s.hidden}, DType::F32, 0.1f, seed + 1);
  w.split = filled(dev, {s.W, s.hidden}, DType::BF16, u(s.hidden), seed + 2);
  w.merge = filled(dev, {s.hidden, s.W}, DType::BF16, u(s.W), seed + 3);
  w.gate = filled(dev, {s.H * s.E, s.D}, DType::F32, u(s.D), seed + 4);
  std::vector<float> bias(s.H * s.E);
  for (int64_t h = 0; h < s.H; ++h)
    for (int64_t e = 0; e < s.E; ++e) {
      const int64_t rank = (e + s.E - (37 * h) % s.E) % s.E;
      bias[h * s.E + e] = rank < 32 ? 0.07f * (1.0f - float(rank) / 32.0f) : 0.0f;
    }
  w.bias = to_device(dev, Tensor::from_data({s.H * s.E}, DType::F32, bias.data()));
  w.ex.gate = filled(dev, {s.H * s.E, s.D, s.De}, DType::BF16, u(s.D), seed + 5);
  w.ex.up = filled(dev, {s.H * s.E, s.D, s.De}, DType::BF16, u(s.D), seed + 6);
  w.ex.down = filled(dev, {s.H * s.E, s.De, s.D}, DType::BF16, u(s.De), seed + 7);
  w.shared_fc1 = filled(dev, {2 * s.Is, s.hidden}, DType::BF16, u(s.hidden), seed + 8);
  w.shared_fc2 = filled(dev, {s.hidden, s.Is}, DType::BF16, u(s.Is), seed + 9);
  w.ms_fc1 = filled(dev, {3 * 2 * s.Im, s.hidden}, DType::BF16, u(s.hidden), seed + 10);
  w.ms_fc2 = filled(dev, {3 * s.hidden, s.Im}, DType::BF16, u(s.Im), seed + 11);
  w.merge_shared = concat_columns(dev, w.merge, w.shared_fc2);
  return w;
}

// Tokens sorted by modality (the model's TokenLayout order): 75% video, 15% audio, the rest text.
std::vector<int64_t> modality_counts(int64_t T) {
  const int64_t v = T * 3 / 4, a = T * 3 / 20;
  return {v, a, T - v - a};
}

struct Activations {
  Tensor x, mod;  // input [T, hidden] BF16; modality I32 [T]
  Tensor xn, split, experts, merge, shared_out, out;
  Tensor cat;  // [T, W + Is]: the routed experts' output (combine), then the shared expert's h
  moe::Routing r;
  moe::Permutation p;
  Tensor rows;
};

// The sub-layer, stage by stage (each stage reads the previous stages' outputs in `a`).
struct Layer {
  cuda::Device& dev;
  const LayerShape& s;
  const LayerWeights& w;
  std::vector<int64_t> counts;
  moe::ExpertPath path = moe::ExpertPath::Auto;
  const moe::GroupedWeights* grouped = nullptr;  // --path grouped: the weights packed once, before timing
  int grouped_kernel = -1;  // -1: GroupedOptions' default
  bool keep_parts = false;  // --dump-check: keep the merge output and shared_out on their own

  void norm(Activations& a) const {
    a.xn = rms_norm(dev, a.x, w.pre_norm, 1e-6f, true, &a.mod, DType::BF16);
  }
  void split(Activations& a) const { a.split = linear(dev, a.xn, w.split, nullptr, DType::BF16); }
  void router(Activations& a) const { a.r = moe::route(dev, a.split, w.gate, w.bias, s.router()); }
  // The grouped path reads no tile table (as the model's routed_experts): tile_rows 0.
  void permute(Activations& a) const { a.p = moe::permute(dev, a.r, s.router(), grouped ? 0 : 64); }
  void experts(Activations& a) const {
    if (grouped) {
      moe::GroupedOptions opt;
      if (grouped_kernel >= 0) opt.kernel = grouped_kernel;
      a.rows = moe::grouped_expert_rows(dev, a.split, a.r, a.p, *grouped, s.router(), DType::BF16, opt);
    }
    else
      a.rows = moe::expert_rows(dev, a.split, a.r, a.p, w.ex, s.router(), DType::BF16, path);
  }
  void combine(Activations& a) const {
    a.cat = cuda_empty(dev, {a.split.size(0), s.W + s.Is}, DType::BF16);
    moe::combine(dev, a.rows, a.r, a.p, s.router(), DType::BF16, &a.cat);
    if (keep_parts) a.experts = moe::combine(dev, a.rows, a.r, a.p, s.router(), DType::BF16);  // [T, W] on its own
  }
  // As the model (magi2/model.cpp) sums the three outputs: a.out = specific, then one GEMM adds
  // [experts | shared h] x [merge | shared_fc2]^T with a.out as its C operand (beta = 1); no
  // element-wise add passes.
  void specific(Activations& a) const {
    const int64_t T = a.xn.size(0);
    Tensor u = cuda_empty(dev, {T, 2 * s.Im}, DType::BF16);
    a.out = cuda_empty(dev, {T, s.hidden}, DType::BF16);
    int64_t row = 0;
    for (int64_t m = 0; m < 3; ++m) {
      const int64_t n = counts[m];
      if (n > 0) gemm_rows(dev, a.xn, w.ms_fc1.slice_rows(m * 2 * s.Im, (m + 1) * 2 * s.Im), false, u, row, row + n);
      row += n;
    }
    const Tensor h = swiglu7_interleaved(dev, u, DType::BF16);
    row = 0;
    for (int64_t m = 0; m < 3; ++m) {
      const int64_t n = counts[m];
      if (n > 0) gemm_rows(dev, h, w.ms_fc2.slice_rows(m * s.hidden, (m + 1) * s.hidden), false, a.out, row, row + n);
      row += n;
    }
  }
  // The shared expert's fc1 and swiglu7, its h into a.cat beside the experts' output (its fc2 runs
  // inside merge()).
  void shared(Activations& a) const {
    const Tensor u = linear(dev, a.xn, w.shared_fc1, nullptr, DType::BF16);
    swiglu7_interleaved(dev, u, DType::BF16, &a.cat, s.W);
    if (keep_parts)  // on its own for --dump-check: specific + shared, as the peer reports it
      a.shared_out = linear(dev, swiglu7_interleaved(dev, u, DType::BF16), w.shared_fc2, nullptr, DType::BF16, &a.out);
  }
  void merge(Activations& a) const {
    if (keep_parts) a.merge = linear(dev, a.experts, w.merge, nullptr, DType::BF16);
    a.out = linear(dev, a.cat, w.merge_shared, nullptr, DType::BF16, &a.out);
  }
  void core(Activations& a) const {
    router(a);
    permute(a);
    experts(a);
    combine(a);
  }
  void all(Activations& a) const {
    norm(a);
    split(a);
    core(a);
    specific(a);
    shared(a);
    merge(a);
  }
};

Activations make_inputs(cuda::Device& dev, const LayerShape& s, int64_t T, const std::vector<int64_t>& counts,
                        uint64_t seed) {
  Activations a;
  a.x = filled(dev, {T, s.hidden}, DType::BF16, std::sqrt(3.0f), seed);
  std::vector<int32_t> mod(T);
  int64_t t = 0;
  for (int m = 0; m < 3; ++m)
    for (int64_t i = 0; i < counts[m]; ++i) mod[t++] = m;
  a.mod = to_device(dev, Tensor::from_data({T}, DType::I32, mod.data()));
  return a;
}

// Tokens per (head, expert): max / mean over the groups, from the permutation's offsets.
double load_ratio(cuda::Device& dev, const Activations& a, int64_t* empty_groups) {
  const Tensor off = to_host(dev, a.p.offsets);
  const int32_t* o = off.data<int32_t>();
  const int64_t G = off.numel() - 1;
  int64_t mx = 0;
  *empty_groups = 0;
  for (int64_t g = 0; g < G; ++g) {
    mx = std::max<int64_t>(mx, o[g + 1] - o[g]);
    *empty_groups += o[g + 1] == o[g];
  }
  return G && o[G] ? double(mx) / (double(o[G]) / double(G)) : 0.0;
}

// grouped_kernel >= 0 (with the grouped path): that GroupedOptions::kernel, as the timed run uses it.
void dump_check(cuda::Device& dev, const std::string& path, moe::ExpertPath expert_path, int grouped_kernel) {
  LayerShape s;
  s.hidden = 512;
  s.W = 512;
  s.H = 4;
  s.E = 32;
  s.K = 6;
  s.D = 128;
  s.De = 128;
  s.Is = 256;
  s.Im = 192;
  const int64_t T = 300;
  const LayerWeights w = make_weights(dev, s, 1000);
  Layer layer{dev, s, w, modality_counts(T), expert_path};
  layer.keep_parts = true;
  moe::GroupedWeights gw;
  if (expert_path == moe::ExpertPath::Grouped && grouped_kernel >= 0) {
    gw = moe::pack_grouped_weights(dev, w.ex, s.router());
    layer.grouped = &gw;
    layer.grouped_kernel = grouped_kernel;
  }
  Activations a = make_inputs(dev, s, T, layer.counts, 77);
  layer.all(a);
  std::vector<std::pair<std::string, Tensor>> out;
  auto put = [&](const char* name, const Tensor& t) { out.emplace_back(name, to_host(dev, t)); };
  put("x", a.x);
  put("modality", a.mod);
  put("pre_norm", w.pre_norm);
  put("split_linear", w.split);
  put("merge_linear", w.merge);
  put("router_gate", w.gate);
  put("expert_bias", w.bias);
  put("experts_gate", w.ex.gate);
  put("experts_up", w.ex.up);
  put("experts_down", w.ex.down);
  put("shared_fc1", w.shared_fc1);
  put("shared_fc2", w.shared_fc2);
  put("ms_fc1", w.ms_fc1);
  put("ms_fc2", w.ms_fc2);
  put("out_split", a.split);
  put("out_topk_indices", a.r.indices);
  put("out_topk_weights", a.r.weights);
  put("out_experts", a.experts);
  put("out_merge", a.merge);
  put("out_shared", a.shared_out);
  put("out", a.out);
  const std::map<std::string, std::string> meta = {
      {"hidden", std::to_string(s.hidden)}, {"heads", std::to_string(s.H)},      {"experts", std::to_string(s.E)},
      {"top_k", std::to_string(s.K)},       {"head_dim", std::to_string(s.D)},   {"expert_inter", std::to_string(s.De)},
      {"shared_inter", std::to_string(s.Is)}, {"modality_inter", std::to_string(s.Im)},
      {"route_scale", fmt::format("{}", s.route_scale)}};
  write_safetensors(path, out, meta);
  std::printf("wrote %s (T %ld, hidden %ld, %ld heads x %ld experts, top-%ld, D %ld, De %ld)\n", path.c_str(),
              long(T), long(s.hidden), long(s.H), long(s.E), long(s.K), long(s.D), long(s.De));
}

// --path grouped: the expert stage split into its kernels (CUDA events between them; best of
// `iters`), for the benchmark's skewed routing and for the same FLOPs on 72 groups of T rows (every
// token on experts 0-5 of each head): the second isolates the cost of many small groups (per-group
// TMA descriptor updates, ragged tiles) from the GEMMs themselves.
void grouped_breakdown(cuda::Device& dev, bench::Report& rep, const LayerShape& s, const moe::GroupedWeights& gw,
                       const Activations& a, int64_t T, const Options& o) {
  const double S = double(T) * s.H * s.K;
  const double f_gu = 4.0 * S * s.D * s.De, f_dn = 2.0 * S * s.D * s.De;
  moe::Routing few;
  {
    std::vector<int32_t> idx(size_t(T * s.H * s.K));
    std::vector<float> wt(idx.size(), 1.0f / float(s.K));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = int32_t(i % size_t(s.K));
    few.indices = to_device(dev, Tensor::from_data({T, s.H, s.K}, DType::I32, idx.data()));
    few.weights = to_device(dev, Tensor::from_data({T, s.H, s.K}, DType::F32, wt.data()));
  }
  const moe::Permutation few_p = moe::permute(dev, few, s.router());
  for (int which = 0; which < 2; ++which) {
    const moe::Routing& r = which ? few : a.r;
    const moe::Permutation& p = which ? few_p : a.p;
    const std::string tag = which ? " [72 groups of T rows]" : " [bench routing]";
    moe::GroupedOptions opt;
    if (o.grouped_kernel >= 0) opt.kernel = o.grouped_kernel;
    Tensor rows;
    const bench::Timing t = time_on_stream(dev, [&] {
      rows = moe::grouped_expert_rows(dev, a.split, r, p, gw, s.router(), DType::BF16, opt);
    }, o.warmup, o.iters);
    float ms[3], best[3] = {1e30f, 1e30f, 1e30f};
    opt.stage_ms = ms;
    for (int i = 0; i < std::max(3, o.iters); ++i) {
      rows = moe::grouped_expert_rows(dev, a.split, r, p, gw, s.router(), DType::BF16, opt);
      for (int j = 0; j < 3; ++j) best[j] = std::min(best[j], ms[j]);
    }
    // Kernels 9, 10, 20, 21 fuse both GEMMs: the time is on the gate/up row and the down row reads 0; 10
    // also gathers its rows itself: the gather row reads 0.
    const bool fused = opt.kernel >= 9;
    const bool gathers = opt.kernel == 10 || opt.kernel == 20 || opt.kernel == 21;
    const std::vector<std::tuple<std::string, double, double>> parts = {
        {"grouped experts total" + tag, t.median(), f_gu + f_dn},
        {"  grouped: gather (sum over chunks)" + tag + (gathers ? " (inside the fused kernel)" : ""), best[0], 0.0},
        {fused ? "  grouped: fused gate/up + swiglu7 + down + weight" + tag : "  grouped: gate/up + swiglu7 GEMM" + tag,
         best[1], fused ? f_gu + f_dn : f_gu},
        {"  grouped: down + weight GEMM" + tag + (fused ? " (inside the fused kernel)" : ""), best[2],
         fused ? 0.0 : f_dn}};
    for (const auto& [name, msv, fl] : parts) {
      rep.row();
      rep.set("T", T);
      rep.set("stage", name);
      rep.set("ms", msv, 3);
      rep.set("TFLOP", fl / 1e12, 3);
      const double tf = fl > 0 ? fl / (msv * 1e-3) / 1e12 : 0.0;
      rep.set("TFLOP/s", tf, 1);
      rep.set("of 770", tf / kCeilingTflops, 3);
      rep.set("path", o.path + " (kernel " + std::to_string(opt.kernel) + ")");
    }
  }
}

// --router-copies N: is the router's two-mode time (1.66 vs 1.9-2.1 ms at T = 65,536, per process;
// NOTES sessions 14-16) a matter of where its operands lie? Times the router on the layer's own gate
// and input, then on N fresh copies of both (each kept alive, so each lands in other memory), the
// original again between copies. A time that follows the copy and not the process is placement.
void router_placement(cuda::Device& dev, bench::Report& rep, const LayerShape& s, const LayerWeights& w,
                      const Activations& a, int64_t T, const Options& o) {
  auto copy = [&](const Tensor& t) {
    Tensor c = cuda_empty(dev, t.shape(), t.dtype());
    AVDIT_CUDA_CHECK(cudaMemcpyAsync(device_ptr(c), t.raw(), size_t(t.nbytes()), cudaMemcpyDeviceToDevice,
                                     dev.stream()));
    return c;
  };
  std::vector<std::pair<Tensor, Tensor>> copies;  // (gate, x), all alive to the end
  auto time_router = [&](const Tensor& gate, const Tensor& x, const std::string& what) {
    moe::Routing r;
    const bench::Timing t = time_on_stream(dev, [&] { r = moe::route(dev, x, gate, w.bias, s.router()); },
                                           o.warmup, o.iters);
    rep.row();
    rep.set("T", T);
    rep.set("stage", "router on " + what);
    rep.set("ms", t.median(), 3);
    rep.set("min ms", t.min(), 3);
    rep.set("path", o.path);
  };
  time_router(w.gate, a.split, "the layer's gate and x");
  for (int c = 0; c < o.router_copies; ++c) {
    copies.emplace_back(copy(w.gate), copy(a.split));
    time_router(copies.back().first, copies.back().second, "copy " + std::to_string(c + 1) + " of both");
    time_router(w.gate, a.split, "the layer's gate and x");
  }
}

int run(const Options& o) {
  cuda::Device dev;
  moe::ExpertPath path = moe::ExpertPath::Auto;
  if (o.path == "simt") path = moe::ExpertPath::Simt;
  else if (o.path == "grouped") path = moe::ExpertPath::Grouped;
  else AVDIT_REQUIRE(o.path == "auto", "--path: auto, simt or grouped, got '{}'", o.path);
  if (!o.dump_check.empty()) {
    // The peer then checks the path (and with --grouped-kernel the kernel) that will be timed.
    dump_check(dev, o.dump_check, path, o.grouped_kernel);
    return 0;
  }
  // --clock: the SM clock and power during each stage's timed runs (bench/gpu_clock.h): under this
  // layer's load an H200 runs at its power cap, and the clock moves the figures (NOTES session 15).
  // Off by default: the sampling thread's NVML calls slow what they watch (session 16: routed core
  // medians +0.03 to +0.42 ms at T = 65,536 in three alternating pairs, and 24-28 ms against ~18 on
  // one machine), so the timed figures come from runs without it.
  std::unique_ptr<bench::ClockSampler> clock;
  if (o.clock) {
    char bus[32] = {};
    AVDIT_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), dev.ordinal()));
    std::string why;
    clock = bench::ClockSampler::open_nvml(bus, &why);
    if (!clock) fmt::print("note: no SM clock / power columns: {}\n", why);
  }
  LayerShape s;
  s.topk_version = o.router_topk;
  const LayerWeights w = make_weights(dev, s, 1);
  // The grouped path runs on weights packed once (gate/up interleaved, K-major), as a model would at
  // load time; the packing is timed on its own row, not inside the expert stage.
  moe::GroupedWeights gw;
  double pack_ms = 0.0;
  if (path == moe::ExpertPath::Grouped) {
    gw = moe::pack_grouped_weights(dev, w.ex, s.router());
    pack_ms = time_on_stream(dev, [&] { gw = moe::pack_grouped_weights(dev, w.ex, s.router()); }, 1, 3).median();
  }
  bench::Report rep("MAGI-2 MoE MLP sub-layer, bf16 (12 heads x 256 experts, top-6, 256->1280->256; hidden 3072)");
  for (const int64_t T : o.tokens) {
    Layer layer{dev, s, w, modality_counts(T), path};
    if (path == moe::ExpertPath::Grouped) {
      layer.grouped = &gw;
      layer.grouped_kernel = o.grouped_kernel;
    }
    Activations a = make_inputs(dev, s, T, layer.counts, 2);
    layer.all(a);  // also the warm-up of every stage's first call
    int64_t empty = 0;
    const double ratio = load_ratio(dev, a, &empty);
    const double S = double(T) * s.H * s.K;
    struct Stage {
      const char* name;
      double flops;
      std::function<void()> f;
    };
    const double f_split = 2.0 * T * s.hidden * s.W, f_router = 2.0 * T * s.H * s.E * s.D;
    const double f_experts = 6.0 * S * s.D * s.De, f_shared = 6.0 * T * s.hidden * s.Is;
    const double f_spec = 6.0 * T * s.hidden * s.Im;
    const std::vector<Stage> stages = {
        {"pre-norm", 0, [&] { layer.norm(a); }},
        {"split linear", f_split, [&] { layer.split(a); }},
        {s.topk_version == 2 ? "router (fp32 logits GEMM + top-k)" : "router (fp32 logits GEMM + top-k, top-K version 1)",
         f_router, [&] { layer.router(a); }},
        {"permutation (counting sort, offsets; tiles for the SIMT path)", 0, [&] { layer.permute(a); }},
        {"experts: gather + gate/up + swiglu7 + down + weight", f_experts, [&] { layer.experts(a); }},
        {"combine", 0, [&] { layer.combine(a); }},
        {"modality shared experts (into out)", f_spec, [&] { layer.specific(a); }},
        {"shared expert fc1 + swiglu7 (its fc2 in the merge)", f_shared * 2 / 3, [&] { layer.shared(a); }},
        {"merge + shared fc2, one GEMM (adds into out)", f_split + f_shared / 3, [&] { layer.merge(a); }},
        {"ROUTED CORE (router..combine)", f_router + f_experts, [&] { layer.core(a); }},
        {"SUB-LAYER (all)", f_router + f_experts + 2 * f_split + f_shared + f_spec, [&] { layer.all(a); }},
    };
    for (const Stage& st : stages) {
      bench::ClockSummary ck;
      const bench::Timing t = time_on_stream(dev, st.f, o.warmup, o.iters, clock.get(), &ck);
      rep.row();
      rep.set("T", T);
      rep.set("stage", std::string(st.name));
      rep.set("ms", t.median(), 3);
      rep.set("min ms", t.min(), 3);
      const double tf = st.flops > 0 ? st.flops / (t.median() * 1e-3) / 1e12 : 0.0;
      rep.set("TFLOP", st.flops / 1e12, 3);
      rep.set("TFLOP/s", tf, 1);
      rep.set("of 770", tf / kCeilingTflops, 3);
      rep.set("max/mean load", ratio, 2);
      rep.set("empty groups", empty);
      rep.set("path", o.path);
      if (clock) {  // over the timed runs, sampled every 2 ms; the last two are fractions of
                    // readings
        rep.set("SM MHz", ck.sm_mhz_mean, 0);
        rep.set("MHz min", ck.sm_mhz_min, 0);
        rep.set("MHz max", ck.sm_mhz_max, 0);
        rep.set("W", ck.watts_mean, 0);
        rep.set("power capped", ck.power_capped, 2);
        rep.set("thermal / hw slowed", ck.slowdown, 2);
      }
    }
    if (o.router_copies > 0) router_placement(dev, rep, s, w, a, T, o);
    if (path == moe::ExpertPath::Grouped) {
      rep.row();
      rep.set("T", T);
      rep.set("stage", std::string("grouped: pack expert weights (once per weight set, not in the stages above)"));
      rep.set("ms", pack_ms, 3);
      rep.set("path", o.path);
      grouped_breakdown(dev, rep, s, gw, a, T, o);
    }
#if AVDIT_MOE_BENCH_NVFP4
    if (o.nvfp4) {
      // Dequantise every routed expert of the layer (gate, up: N = De, K = D; down: N = D, K = De)
      // into bf16 K-major chunks of 256 experts, as the packed path would in front of the GEMM.
      const int64_t G = s.H * s.E, chunk = 256;
      auto packed_stack = [&](int64_t N, int64_t K, uint8_t code) {
        Tensor p = cuda_empty(dev, {G, N, K / 2}, DType::U8), sc = cuda_empty(dev, {G, N, K / 16}, DType::F8_E4M3);
        AVDIT_CUDA_CHECK(cudaMemsetAsync(device_ptr(p), code, size_t(p.nbytes()), dev.stream()));
        AVDIT_CUDA_CHECK(cudaMemsetAsync(device_ptr(sc), 0x38, size_t(sc.nbytes()), dev.stream()));  // e4m3 1.0
        Tensor gs = filled(dev, {G}, DType::F32, 2.0f, 99);
        return std::tuple{p, sc, gs};
      };
      auto [gp, gsc, ggs] = packed_stack(s.De, s.D, 0x5A);
      auto [dp, dsc, dgs] = packed_stack(s.D, s.De, 0x3B);
      Tensor buf_gu = cuda_empty(dev, {chunk, s.De, s.D}, DType::BF16), buf_d = cuda_empty(dev, {chunk, s.D, s.De}, DType::BF16);
      const bench::Timing t = time_on_stream(dev, [&] {
        for (int64_t g0 = 0; g0 < G; g0 += chunk) {
          const int64_t g1 = std::min(G, g0 + chunk);
          dequantize_nvfp4_bf16(dev, gp, gsc, ggs, g0, g1, buf_gu);  // gate
          dequantize_nvfp4_bf16(dev, gp, gsc, ggs, g0, g1, buf_gu);  // up (same sizes)
          dequantize_nvfp4_bf16(dev, dp, dsc, dgs, g0, g1, buf_d);
        }
      }, o.warmup, o.iters);
      const double bytes = 3.0 * G * s.D * s.De * (0.5 + 1.0 / 16 + 2.0);
      rep.row();
      rep.set("T", T);
      rep.set("stage", std::string("nvfp4 dequantise all routed experts (per layer, T-independent)"));
      rep.set("ms", t.median(), 3);
      rep.set("min ms", t.min(), 3);
      rep.set("TFLOP", 0.0, 3);
      rep.set("TFLOP/s", bytes / (t.median() * 1e-3) / 1e12, 1);  // here: TB/s moved
      rep.set("path", std::string("nvfp4 (TFLOP/s column = TB/s)"));
    }
#else
    if (o.nvfp4 && T == o.tokens.front())
      std::printf("note: --nvfp4 not built in (the GPU NVFP4 dequantiser was not linked when this bench was written)\n");
#endif
  }
  rep.emit(o.json);
  return 0;
}

}  // namespace
#endif

Run add_bench_moe(CLI::App& bench) {
  auto opt = std::make_shared<Options>();
  auto* cmd = bench.add_subcommand(
      "moe", "The MAGI-2 MoE MLP sub-layer (bf16, 12 x 256 experts, top-6) at T tokens: per-stage CUDA-event times");
  cmd->add_option("--tokens", opt->tokens, "token counts (comma-separated), default 16384,65536,131072")
      ->delimiter(',');
  cmd->add_option("--warmup", opt->warmup, "untimed runs per stage");
  cmd->add_option("--iters", opt->iters, "timed runs per stage (median reported)");
  cmd->add_option("--json", opt->json, "also write the rows as JSON here");
  cmd->add_option("--path", opt->path,
                  "expert kernels: auto (grouped where it runs, packing the weights per call), simt, or grouped "
                  "(CUTLASS sm90 grouped GEMMs on weights packed once)");
  cmd->add_option("--dump-check", opt->dump_check,
                  "write a small-shape run (weights, inputs, outputs) to this safetensors file for the peer, then exit");
  cmd->add_option("--grouped-kernel", opt->grouped_kernel,
                  "--path grouped: the expert-GEMM variant 0-7, 9, 10, 20, 21 (GroupedOptions::kernel in moe/grouped.h; default: its "
                  "default)");
  cmd->add_option("--router-topk", opt->router_topk,
                  "the router's top-K rounds: 2 (default, each lane keeps its best two) or 1 (each round rescans); "
                  "RouterConfig::topk_version in moe/moe.h, to time one against the other")
      ->check(CLI::IsMember({1, 2}));
  cmd->add_option("--router-copies", opt->router_copies,
                  "also time the router on N fresh copies of its gate and input, the originals between them "
                  "(is its two-mode time placement?)")
      ->check(CLI::Range(0, 16));
  cmd->add_flag("--clock", opt->clock,
                "also sample the SM clock and power (NVML, every 2 ms) during each stage: extra columns, but the "
                "sampling slows the stages a little (bench/NOTES.md session 16); off by default");
  cmd->add_flag("--nvfp4", opt->nvfp4, "also time the NVFP4 dequantisation of the layer's routed experts");
  return [opt]() -> int {
#if AVDIT_HAVE_CUDA
    return run(*opt);
#else
    (void)opt;
    bench_needs_cuda("moe");
#endif
  };
}

}  // namespace avdit::app
