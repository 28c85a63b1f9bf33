// `avdit bench moe`: the MAGI-2 preview's MoE MLP sub-layer on the GPU in bf16, run through the
// model's own calls (Magi2Model::moe_mlp of a one-layer model with the preview's widths, random
// weights made on the GPU): pre-norm, split linear, the multi-head router, the routed experts
// (permutation, the fused experts kernel or its fallback, combine), the shared and the
// modality-specific experts, the merge - at T tokens with skewed expert loads (a hot set of experts
// per head through expert_bias, max/mean tokens per expert ~3, measured and printed). Per-stage
// times from CUDA events at the sub-layer's named points (moe.{i}.*: a PointTimer), median of
// --iters runs; TFLOP/s and the fraction of the card's 770 TFLOP/s bf16 ceiling. --dump-check FILE
// writes a small-shape run (weights, inputs, outputs) for bench/peers/moe_peer.py to check itself
// against before it times. Correctness against the CPU: tests/gpu/moe_cuda_test.cpp and
// tests/gpu/magi2_cuda_test.cpp.
#include "bench_commands.h"

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

#if AVDIT_HAVE_CUDA
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>

#include "analysis/routes/recorder.h"
#include "backend/cuda/context.h"
#include "backend/cuda/point_timer.h"
#include "backend/cuda/timer.h"
#include "bench/report.h"
#include "io/safetensors.h"
#include "models/magi2/api.h"
#include "models/magi2/dump.h"
#include "models/magi2/model.h"
#include "ops/cuda/nvfp4_dequant.h"
#include "ops/random.h"
#include "ops/rows.h"
#endif

namespace avdit::app {
namespace {

struct Options {
  std::vector<int64_t> tokens = {16384, 65536, 131072};
  int warmup = 2, iters = 10;
  std::string json, dump_check;
  std::string config =
      std::string(AVDIT_SHARED_DIR) + "/reference-configs/magi2/magi2_preview.json";
  bool nvfp4 = false;
  bool clock = false;  // NVML sampling of the SM clock and power (off: it perturbs the times)
  bool route_stats = false;  // also time the sub-layer with router statistics collected
};

}  // namespace

#if AVDIT_HAVE_CUDA
namespace {

namespace m2 = ::avdit::models::magi2;
constexpr double kCeilingTflops = 770.0;  // measured bf16 GEMM ceiling of the H200 (TARGETS.md)

// A config with the given one's arch and only its first MoE layer: layer 0, MoE, not an mm layer.
nlohmann::json one_moe_layer(nlohmann::json j) {
  nlohmann::json& a = j["arch_config"];
  a["num_layers"] = 1;
  a["mm_layers"] = nlohmann::json::array();
  a["moe_config"]["moe_layers"] = nlohmann::json::array({0});
  return j;
}

// Tokens sorted by modality (the model's TokenLayout order): 75% video, 15% audio, the rest text.
std::vector<int32_t> modalities(int64_t T) {
  const int64_t v = T * 3 / 4, a = T * 3 / 20;
  std::vector<int32_t> m(T, m2::kText);
  std::fill(m.begin(), m.begin() + v, m2::kVideo);
  std::fill(m.begin() + v, m.begin() + v + a, m2::kAudio);
  return m;
}

// The sub-layer needs a plan only for its token groups: one item, singleton RoPE axes.
m2::Magi2Plan plan_for(const m2::Magi2Model& model, int64_t T) {
  Tensor coords = Tensor::zeros({T, 9}, DType::F32);
  for (int64_t l = 0; l < T; ++l)
    for (int a = 3; a < 9; ++a) coords.f32()[l * 9 + a] = 1.0f;
  return model.plan(modalities(T), coords, {0, T});
}

// The router bias that makes 32 experts per head "hot" (0.07 x (1 - rank/32), a different set per
// head): max/mean tokens per expert ~3 on N(0, 1)-ish logits (the run prints the measured ratio).
void set_hot_bias(ops::Context& ctx, const m2::Magi2Model& model) {
  const m2::Magi2Config& c = model.config();
  const int64_t H = c.moe.num_heads, E = c.moe.num_experts;
  std::vector<float> bias(H * E);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t e = 0; e < E; ++e) {
      const int64_t rank = (e + E - (37 * h) % E) % E;
      bias[h * E + e] = rank < 32 ? 0.07f * (1.0f - float(rank) / 32.0f) : 0.0f;
    }
  Tensor b = model.weights().layers[0].moe_mlp.expert_bias;  // a handle on the model's tensor
  ops::copy_(ctx, b, ctx.upload(Tensor::from_floats(bias, {H * E})));
}

// Tokens per (head, expert) from the routing the sub-layer made (its moe.{0}.router point): max /
// mean over the groups, and the empty groups.
class LoadProbe final : public Probe {
 public:
  explicit LoadProbe(int64_t experts) : E_(experts) {}
  bool wants(const Point& p) const override { return p.is("moe.{}.router"); }
  void on(ops::Context& ctx, const Point&, Tensor& t) override {
    const Tensor idx = ctx.download(t);  // I32 [T, H, K]
    const int64_t H = idx.size(1), K = idx.size(2), T = idx.size(0);
    std::vector<int64_t> n(H * E_, 0);
    const int32_t* v = idx.data<int32_t>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t k = 0; k < K; ++k) ++n[h * E_ + v[(t * H + h) * K + k]];
    const int64_t mx = *std::max_element(n.begin(), n.end());
    empty = std::count(n.begin(), n.end(), 0);
    ratio = double(mx) / (double(T * H * K) / double(H * E_));
  }
  double ratio = 0;
  int64_t empty = 0;

 private:
  int64_t E_;
};

// --dump-check: a small shape (hidden 512, 4 heads x 32 experts, top-6, D 128, De 128, shared 256,
// modality 192) through the same calls on a random checkpoint, then the weights the sub-layer used,
// its input and its outputs under the peer's names.
void dump_check(ops::CudaContext& ctx, const Options& o, const std::string& path) {
  nlohmann::json j = one_moe_layer(read_json(o.config));
  nlohmann::json& a = j["arch_config"];
  a["hidden_size"] = 512;
  a["head_dim"] = 64;
  a["num_query_groups"] = 2;
  nlohmann::json& moe = a["moe_config"];
  moe["num_heads"] = 4;
  moe["num_experts"] = 32;
  moe["top_k"] = 6;
  moe["expert_intermediate_size"] = 128;
  moe["shared_expert_intermediate_size"] = 256;
  moe["modality_specific_expert_intermediate_size"] = 192;
  moe["split_merge_intermediate_size"] = 512;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("avdit_bench_moe_check_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  m2::init_checkpoint(j, dir, 1000);
  const Checkpoint ckpt = Checkpoint::open(dir);
  const m2::Magi2Model model(ctx, ckpt, DType::BF16);
  const m2::Magi2Config& c = model.config();
  const int64_t T = 300;
  const m2::Magi2Plan plan = plan_for(model, T);
  Tensor x = ctx.empty({T, c.hidden_size}, DType::BF16);
  ops::fill_normal(ctx, x, 77, 0.f, 1.f);
  m2::DumpProbe probe;
  Tensor out;
  {
    const ProbeScope scope(ctx.observer(), &probe);
    out = model.moe_mlp(0, plan, x);
  }
  TensorMap& d = probe.tensors();  // packed order = this plan's order (modalities sorted)
  const std::string p = "block.layers.0.mlp.";
  std::vector<std::pair<std::string, Tensor>> f;
  auto put = [&](const char* name, const Tensor& t) { f.emplace_back(name, ctx.download(t)); };
  put("x", x);
  const std::vector<int32_t> mod = modalities(T);
  f.emplace_back("modality", Tensor::from_data({T}, DType::I32, mod.data()));
  put("pre_norm", model.weights().layers[0].moe_mlp.pre_norm);
  put("split_linear", ckpt.get(p + "split_linear.weight"));
  put("merge_linear", ckpt.get(p + "merge_linear.weight"));
  put("router_gate", model.weights().layers[0].moe_mlp.gate);
  put("expert_bias", model.weights().layers[0].moe_mlp.expert_bias);
  put("experts_gate", ckpt.get(p + "moe_mlp.W_gate"));
  put("experts_up", ckpt.get(p + "moe_mlp.W_up"));
  put("experts_down", ckpt.get(p + "moe_mlp.W_down"));
  put("shared_fc1", ckpt.get(p + "shared_expert_fc1.weight"));
  put("shared_fc2", ckpt.get(p + "shared_expert_fc2.weight"));
  put("ms_fc1", ckpt.get(p + "modality_specific_shared_expert_fc1.weight"));
  put("ms_fc2", ckpt.get(p + "modality_specific_shared_expert_fc2.weight"));
  f.emplace_back("out_split", d.at("layers.0.moe.split_out").to(DType::BF16));
  f.emplace_back("out_topk_indices", d.at("layers.0.router.topk_indices").to(DType::I32));
  f.emplace_back("out_topk_weights", d.at("layers.0.router.topk_weights"));
  f.emplace_back("out_experts", d.at("layers.0.moe.experts_out").to(DType::BF16));
  f.emplace_back("out_merge", d.at("layers.0.moe.merge_out").to(DType::BF16));
  f.emplace_back("out_shared", d.at("layers.0.moe.shared_out").to(DType::BF16));
  put("out", out);
  const std::map<std::string, std::string> meta = {
      {"hidden", std::to_string(c.hidden_size)},
      {"heads", std::to_string(c.moe.num_heads)},
      {"experts", std::to_string(c.moe.num_experts)},
      {"top_k", std::to_string(c.moe.top_k)},
      {"head_dim", std::to_string(c.moe_head_dim)},
      {"expert_inter", std::to_string(c.moe.expert_intermediate_size)},
      {"shared_inter", std::to_string(c.moe.shared_expert_intermediate_size)},
      {"modality_inter", std::to_string(c.moe.modality_specific_expert_intermediate_size)},
      {"route_scale", fmt::format("{}", c.moe.route_scale)}};
  write_safetensors(path, f, meta);
  std::filesystem::remove_all(dir);
  std::printf("wrote %s (T %ld, hidden %ld, %ld heads x %ld experts, top-%ld, D %ld, De %ld)\n",
              path.c_str(), long(T), long(c.hidden_size), long(c.moe.num_heads),
              long(c.moe.num_experts), long(c.moe.top_k), long(c.moe_head_dim),
              long(c.moe.expert_intermediate_size));
}

// The stages between the sub-layer's points (the PointTimer's marks, in order).
struct Stage {
  const char* point;  // the mark that ends the stage
  const char* name;
};
constexpr Stage kStages[] = {
    {"moe.{}.norm", "pre-norm"},
    {"moe.{}.split", "split linear"},
    {"moe.{}.router", "router (fp32 logits GEMM + top-k)"},
    {"moe.{}.experts", "routed experts: permutation + experts + combine"},
    {"moe.{}.shared", "shared expert fc1 + swiglu7 (its fc2 in the merge)"},
    {"moe.{}.specific", "modality shared experts"},
    {"moe.{}.out", "merge + shared fc2 + specific, one GEMM"},
};

// --nvfp4: dequantise every routed expert of the layer (gate, up: N = De, K = D; down: N = D, K =
// De) into bf16 K-major, as the NVFP4 path does per call in front of the expert kernels
// (T-independent).
void nvfp4_row(ops::CudaContext& ctx, bench::Report& rep, const m2::Magi2Config& c, int64_t T,
               const Options& o) {
  cuda::Device& dev = ctx.dev();
  const int64_t G = c.moe.num_heads * c.moe.num_experts, D = c.moe_head_dim,
                De = c.moe.expert_intermediate_size;
  auto packed_stack = [&](int64_t N, int64_t K, uint8_t code) {
    Tensor p = ctx.empty({G, N, K / 2}, DType::U8), sc = ctx.empty({G, N, K / 16}, DType::F8_E4M3);
    AVDIT_CUDA_CHECK(cudaMemsetAsync(cuda::device_ptr(p), code, size_t(p.nbytes()), ctx.stream()));
    AVDIT_CUDA_CHECK(cudaMemsetAsync(cuda::device_ptr(sc), 0x38, size_t(sc.nbytes()),
                                     ctx.stream()));  // e4m3 1.0
    Tensor gs = ctx.empty({G}, DType::F32);
    ops::fill_normal(ctx, gs, 99, 2.0f, 0.1f);
    return std::tuple{p, sc, gs};
  };
  auto [gp, gsc, ggs] = packed_stack(De, D, 0x5A);
  auto [dp, dsc, dgs] = packed_stack(D, De, 0x3B);
  Tensor gate_up = ctx.empty({G, 2 * De, D}, DType::BF16),
         down = ctx.empty({G, D, De}, DType::BF16);
  const bench::Timing t = cuda::time_on_stream(
      dev,
      [&] {
        cuda::dequantize_nvfp4_bf16(dev, gp, gsc, ggs, 0, G, gate_up, 2, 0);  // gate
        cuda::dequantize_nvfp4_bf16(dev, gp, gsc, ggs, 0, G, gate_up, 2, 1);  // up (same sizes)
        cuda::dequantize_nvfp4_bf16(dev, dp, dsc, dgs, 0, G, down);
      },
      o.warmup, o.iters);
  const double bytes = 3.0 * G * D * De * (0.5 + 1.0 / 16 + 2.0);
  rep.row();
  rep.set("T", T);
  rep.set("stage", std::string("nvfp4 dequantise all routed experts (per layer, T-independent)"));
  rep.set("ms", t.median(), 3);
  rep.set("min ms", t.min(), 3);
  rep.set("TFLOP", 0.0, 3);
  rep.set("TFLOP/s", bytes / (t.median() * 1e-3) / 1e12, 1);  // here: TB/s moved
  rep.set("path", std::string("nvfp4 (TFLOP/s column = TB/s)"));
}

// --route-stats: the sub-layer end to end without and with the router statistics probe attached
// (what generate --route-stats adds to each MoE layer: the router's score gap and one tally
// kernel), alternating runs so that clock drift hits both alike; per-run milliseconds of each.
std::pair<std::vector<double>, std::vector<double>> route_stats_runs(ops::CudaContext& ctx,
                                                                     const m2::Magi2Model& model,
                                                                     const m2::Magi2Plan& plan,
                                                                     const Tensor& x, int64_t T,
                                                                     const Options& o) {
  analysis::routes::RouteRecorder recorder;
  m2::PackedSequence layout;
  layout.modality = modalities(T);
  layout.cu_seqlens = {0, T};
  recorder.begin(ctx, model.config(), layout, 1);
  auto once = [&](bool collect) {
    const ProbeScope scope(ctx.observer(), collect ? &recorder : nullptr);
    return cuda::time_on_stream(ctx.dev(), [&] { model.moe_mlp(0, plan, x); }, 0, 1).ms.front();
  };
  for (int i = 0; i < o.warmup; ++i) once(false), once(true);
  std::vector<double> off, on;
  for (int it = 0; it < o.iters; ++it) {
    off.push_back(once(false));
    on.push_back(once(true));
  }
  recorder.finish(ctx);  // checks that every run's choices were counted
  return {off, on};
}

int run(const Options& o) {
  ops::CudaContext ctx;
  if (!o.dump_check.empty()) {
    dump_check(ctx, o, o.dump_check);
    return 0;
  }
  // --clock: the SM clock and power during each T's timed runs (bench/gpu_clock.h). Off by default:
  // the sampling thread's NVML calls slow what they watch.
  std::unique_ptr<bench::ClockSampler> clock;
  if (o.clock) {
    char bus[32] = {};
    AVDIT_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), ctx.dev().ordinal()));
    std::string why;
    clock = bench::ClockSampler::open_nvml(bus, &why);
    if (!clock) fmt::print("note: no SM clock / power columns: {}\n", why);
  }
  const m2::Magi2Config c = m2::parse_magi2_config(one_moe_layer(read_json(o.config)));
  const m2::Magi2Model model(ctx, c, DType::BF16, 1);
  set_hot_bias(ctx, model);
  const int64_t hidden = c.hidden_size, W = c.moe_width, H = c.moe.num_heads, E = c.moe.num_experts,
                K = c.moe.top_k, D = c.moe_head_dim, De = c.moe.expert_intermediate_size,
                Is = c.moe.shared_expert_intermediate_size,
                Im = c.moe.modality_specific_expert_intermediate_size;
  bench::Report rep(fmt::format(
      "MAGI-2 MoE MLP sub-layer, bf16 ({} heads x {} experts, top-{}, {}->{}->{}; hidden {})", H, E,
      K, D, De, D, hidden));
  for (const int64_t T : o.tokens) {
    const m2::Magi2Plan plan = plan_for(model, T);
    Tensor x = ctx.empty({T, hidden}, DType::BF16);
    ops::fill_normal(ctx, x, 2, 0.f, 1.f);
    LoadProbe load(E);
    {
      const ProbeScope scope(ctx.observer(), &load);
      model.moe_mlp(0, plan, x);  // also the warm-up of every kernel's first call
    }
    for (int i = 0; i < o.warmup; ++i) model.moe_mlp(0, plan, x);
    ops::PointTimer timer(
        [](const Point& p) { return p.index == 0 && std::strncmp(p.name, "moe.{}.", 7) == 0; });
    std::map<std::string, std::vector<double>> ms;
    std::vector<double> core, total;
    bench::ClockSummary ck;
    ctx.synchronize();
    if (clock) clock->start();
    for (int it = 0; it < o.iters; ++it) {
      const ProbeScope scope(ctx.observer(), &timer);
      timer.start(ctx);
      model.moe_mlp(0, plan, x);
      double sum = 0, routed = 0;
      for (const auto& [p, t] : timer.take()) {
        ms[p.name].push_back(t);
        sum += t;
        if (p.is("moe.{}.router") || p.is("moe.{}.experts")) routed += t;
      }
      core.push_back(routed);
      total.push_back(sum);
    }
    if (clock) ck = clock->stop();
    const double S = double(T) * H * K;
    const double f_split = 2.0 * T * hidden * W, f_router = 2.0 * T * H * E * D;
    const double f_experts = 6.0 * S * D * De, f_shared = 6.0 * T * hidden * Is,
                 f_spec = 6.0 * T * hidden * Im;
    const std::map<std::string, double> flops = {
        {"moe.{}.split", f_split},     {"moe.{}.router", f_router},
        {"moe.{}.experts", f_experts}, {"moe.{}.shared", f_shared * 2 / 3},
        {"moe.{}.specific", f_spec},   {"moe.{}.out", f_split + f_shared / 3}};
    auto row = [&](const std::string& name, std::vector<double> v, double fl) {
      bench::Timing t;
      t.ms = std::move(v);
      rep.row();
      rep.set("T", T);
      rep.set("stage", name);
      rep.set("ms", t.median(), 3);
      rep.set("min ms", t.min(), 3);
      const double tf = fl > 0 ? fl / (t.median() * 1e-3) / 1e12 : 0.0;
      rep.set("TFLOP", fl / 1e12, 3);
      rep.set("TFLOP/s", tf, 1);
      rep.set("of 770", tf / kCeilingTflops, 3);
      rep.set("max/mean load", load.ratio, 2);
      rep.set("empty groups", load.empty);
      rep.set("path", std::string("model"));
      if (clock) {  // over all the timed runs of this T, sampled every 2 ms
        rep.set("SM MHz", ck.sm_mhz_mean, 0);
        rep.set("MHz min", ck.sm_mhz_min, 0);
        rep.set("MHz max", ck.sm_mhz_max, 0);
        rep.set("W", ck.watts_mean, 0);
        rep.set("power capped", ck.power_capped, 2);
        rep.set("thermal / hw slowed", ck.slowdown, 2);
      }
    };
    for (const Stage& st : kStages) {
      auto f = flops.find(st.point);
      row(st.name, ms[st.point], f == flops.end() ? 0.0 : f->second);
    }
    row("ROUTED CORE (router..combine)", core, f_router + f_experts);
    row("SUB-LAYER (all)", total, f_router + f_experts + 2 * f_split + f_shared + f_spec);
    if (o.route_stats) {
      const double f_all = f_router + f_experts + 2 * f_split + f_shared + f_spec;
      auto [off, on] = route_stats_runs(ctx, model, plan, x, T, o);
      bench::Timing a, b;
      a.ms = off;
      b.ms = on;
      row("SUB-LAYER end to end, no probe", off, f_all);
      row("SUB-LAYER end to end, route statistics collected", on, f_all);
      fmt::print("T {}: route statistics cost {:+.2f}% of the MoE sub-layer ({:.3f} -> {:.3f} ms, "
                 "medians of {} alternating runs)\n",
                 T, 100.0 * (b.median() / a.median() - 1.0), a.median(), b.median(), o.iters);
    }
    if (o.nvfp4) nvfp4_row(ctx, rep, c, T, o);
  }
  rep.emit(o.json);
  return 0;
}

}  // namespace
#endif

Run add_bench_moe(CLI::App& bench) {
  auto opt = std::make_shared<Options>();
  auto* cmd = bench.add_subcommand("moe",
                                   "The MAGI-2 MoE MLP sub-layer (bf16, 12 x 256 experts, top-6) "
                                   "at T tokens: per-stage CUDA-event times");
  cmd->add_option("--tokens", opt->tokens,
                  "token counts (comma-separated), default 16384,65536,131072")
      ->delimiter(',');
  cmd->add_option("--warmup", opt->warmup, "untimed runs per T");
  cmd->add_option("--iters", opt->iters, "timed runs per T (median reported)");
  cmd->add_option("--json", opt->json, "also write the rows as JSON here");
  cmd->add_option("--config", opt->config,
                  "the MAGI-2 config whose MoE widths are timed (default: the preview's)");
  cmd->add_option("--dump-check", opt->dump_check,
                  "write a small-shape run (weights, inputs, outputs) to this safetensors file for "
                  "the peer, then exit");
  cmd->add_flag("--clock", opt->clock,
                "also sample the SM clock and power (NVML, every 2 ms) during each T's timed runs: "
                "extra columns, "
                "but the sampling slows the stages a little; off by default");
  cmd->add_flag("--nvfp4", opt->nvfp4,
                "also time the NVFP4 dequantisation of the layer's routed experts");
  cmd->add_flag("--route-stats", opt->route_stats,
                "also time the sub-layer end to end with and without router statistics collected "
                "(generate --route-stats), alternating runs, and print the difference");
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
