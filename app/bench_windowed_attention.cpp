// `avdit bench windowed-attention`: one call of the MAGI-2 refiner's windowed attention op at the
// range list the reference builds for a clip (default: 10 s at 1080p with the release's refiner
// config), random q/k/v at the refiner's heads; time, TFLOP/s over the attended pairs, peak memory.
// --dump-ranges writes the list so that bench/peers/windowed_attention_peer.py times torch on the
// very same rows. FLOP convention: 4 * pairs * D * Hq (QK^T and PV, 2 flops per multiply-add, per
// query head; pairs = attended (query, key) pairs of the plan, no masked work counted).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/report.h"
#include "bench_commands.h"
#include "context.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "models/magi2/refiner/config.h"
#include "models/magi2/refiner/packing.h"
#include "models/magi2/refiner/window_ranges.h"
#include "ops/context.h"
#include "ops/random.h"
#include "ops/windowed_attention.h"
#include "refiner_layout.h"

#if AVDIT_HAVE_CUDA
#include "backend/cuda/context.h"
#endif

namespace avdit::app {
namespace {

namespace refiner = models::magi2::refiner;

struct WinOptions {
  std::string device = "cuda";
  std::string config;  // default: the shared reference config
  double seconds = 10;
  int64_t height = 1088, width = 1920;                // refiner pixels (the reference's 1080p tier)
  int64_t preview_height = 512, preview_width = 896;  // its preview, which fixes T
  int64_t text_tokens = 1000;
  bool small = false;
  std::string dtype = "bf16";
  int iters = 5, warmup = 1;
  std::string json, dump_ranges, dump_io;
  bool plan_only = false;
};

// The refiner's token layout of one forward: the latent grid and the tail.
struct Layout {
  int64_t T = 0, H = 0, W = 0, audio = 0, text = 0;
  int64_t video() const { return T * H * W; }
  int64_t tokens() const { return video() + audio + text; }
};

Layout layout_of(const WinOptions& o, const nlohmann::json& merged,
                 const refiner::RefinerConfig& rc) {
  Layout l;
  l.text = o.text_tokens;
  if (o.small) {
    // 2 x 2 x 6 blocks of 8 x 4 x 4: along w the radius-2 window leaves blocks out, so the list
    // is windowed and not dense, at a size the CPU reference runs in seconds.
    l.T = 9, l.H = 8, l.W = 24;
    return l;
  }
  const RefinerGrid g = refiner_clip_grid(merged, rc, o.seconds, o.preview_height, o.preview_width,
                                          o.height, o.width, "bench windowed-attention");
  l.T = g.T, l.H = g.H, l.W = g.W, l.audio = g.audio;
  return l;
}

std::string device_name(ops::Context& ctx) {
#if AVDIT_HAVE_CUDA
  if (ctx.is_cuda()) {
    const auto& p = static_cast<ops::CudaContext&>(ctx).dev().props();
    return fmt::format("{} (sm_{}{})", p.name, p.major, p.minor);
  }
#endif
  return "CPU (the float32 reference op)";
}

void write_raw(const std::filesystem::path& p, const Tensor& host) {
  write_file_atomic(p, std::string_view(static_cast<const char*>(host.raw()),
                                        static_cast<size_t>(host.nbytes())));
}

int run_windowed_attention(const WinOptions& o) {
  AVDIT_REQUIRE(o.iters >= 1 && o.warmup >= 0,
                "bench windowed-attention: --iters >= 1 and --warmup >= 0");
  AVDIT_REQUIRE(o.text_tokens >= 0 && o.text_tokens <= 100000,
                "bench windowed-attention: --text-tokens {}: expected 0 to 100000", o.text_tokens);
  const DType dt = o.dtype == "bf16" ? DType::BF16 : o.dtype == "fp16" ? DType::F16 : DType::F32;
  const std::filesystem::path config_file =
      o.config.empty()
          ? std::filesystem::path(AVDIT_SHARED_DIR) / "reference-configs/magi2/magi2_refiner.json"
          : std::filesystem::path(o.config);
  nlohmann::json merged;
  const refiner::RefinerConfig rc = refiner::read_refiner_config(config_file, &merged);
  const Layout l = layout_of(o, merged, rc);
  const refiner::WindowConfig& w = rc.data_proxy.window;
  const refiner::BlockGrid grid = refiner::block_grid(l.T, l.H, l.W, w);
  const int64_t L = l.tokens();
  const std::vector<ops::RangePair> rows = refiner::window_range_list(grid, w, L);
  const int64_t groups = static_cast<int64_t>(ops::merge_ranges(rows).q.size());
  const int64_t hq = rc.num_heads_q, hkv = rc.num_heads_kv, d = rc.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  if (!o.dump_ranges.empty()) {
    nlohmann::json r = nlohmann::json::array();
    for (const ops::RangePair& p : rows) r.push_back({p.q.begin, p.q.end, p.k.begin, p.k.end});
    const nlohmann::json j = {
        {"config", config_file.string()},
        {"grid", {l.T, l.H, l.W}},
        {"block", {w.block_t, w.block_h, w.block_w}},
        {"radius", {w.radius_t, w.radius_h, w.radius_w}},
        {"video_tokens", l.video()},
        {"audio_tokens", l.audio},
        {"text_tokens", l.text},
        {"q_rows", L},
        {"k_rows", L},
        {"hq", hq},
        {"hkv", hkv},
        {"d", d},
        {"scale", scale},
        {"ranges", r}};  // [q_begin, q_end, k_begin, k_end], half-open, the reference's row order
    write_file_atomic(o.dump_ranges, j.dump() + "\n");
  }

  if (o.plan_only) {
    // The layout's figures without the call (any machine, seconds): what the GPU run will do.
    ops::CpuContext host;
    const ops::WindowPlan plan = ops::plan_window(host, rows, L, L);
    std::printf(
        "grid %lld,%lld,%lld: %lld tokens (%lld video, %lld tail), %zu range pairs, %lld query "
        "groups, %zu segments, %lld attended pairs (%.4f of L^2), %.3f PFLOP per call (4 * pairs * "
        "%lld * %lld)\n",
        (long long)l.T, (long long)l.H, (long long)l.W, (long long)L, (long long)l.video(),
        (long long)(l.audio + l.text), rows.size(), (long long)groups, plan.segments.size(),
        (long long)plan.pairs, double(plan.pairs) / (double(L) * double(L)),
        4.0 * double(plan.pairs) * double(d) * double(hq) / 1e15, (long long)d, (long long)hq);
    return 0;
  }
  const std::unique_ptr<ops::Context> ctx = make_context(o.device);
  ctx->reset_pool_peak();
  reset_host_rss_peak();
  const ops::WindowPlan plan = ops::plan_window(*ctx, rows, L, L);
  Tensor q = ctx->empty({L, hq, d}, dt), k = ctx->empty({L, hkv, d}, dt),
         v = ctx->empty({L, hkv, d}, dt), out = ctx->empty({L, hq, d}, dt);
  ops::fill_normal(*ctx, q, 1, 0.f, 1.f);
  ops::fill_normal(*ctx, k, 2, 0.f, 1.f);
  ops::fill_normal(*ctx, v, 3, 0.f, 1.f);
  ctx->synchronize();
  const int64_t io_bytes = q.nbytes() + k.nbytes() + v.nbytes() + out.nbytes();

  bench::Timing t;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ops::windowed_attention_into(*ctx, q, k, v, scale, plan, nullptr, out);
    ctx->synchronize();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i >= o.warmup) t.ms.push_back(ms);
  }
  const int64_t peak = ctx->is_cuda() ? ctx->pool_peak() : host_rss_peak();

  if (!o.dump_io.empty()) {
    // The inputs and avdit's output of this call, for the peer's --check against a dense mask.
    AVDIT_REQUIRE(L <= 65536, "bench windowed-attention: --dump-io writes {} tokens; use --small",
                  L);
    std::filesystem::create_directories(o.dump_io);
    const std::filesystem::path dir(o.dump_io);
    write_raw(dir / "q.bin", ctx->download(q).to_f32());
    write_raw(dir / "k.bin", ctx->download(k).to_f32());
    write_raw(dir / "v.bin", ctx->download(v).to_f32());
    // A float32 output of the same call, so the check sees the op's arithmetic, not the rounding
    // of its bf16 output.
    Tensor out32 = ctx->empty({L, hq, d}, DType::F32);
    ops::windowed_attention_into(*ctx, q, k, v, scale, plan, nullptr, out32);
    write_raw(dir / "out.bin", ctx->download(out32));
    const nlohmann::json meta = {{"L", L},
                                 {"hq", hq},
                                 {"hkv", hkv},
                                 {"d", d},
                                 {"dtype", o.dtype},
                                 {"scale", scale},
                                 {"layout", "f32 [L, H, D], out float32"},
                                 {"device", o.device}};
    write_file_atomic(dir / "meta.json", meta.dump(2) + "\n");
  }

  const double flop =
      4.0 * static_cast<double>(plan.pairs) * static_cast<double>(d) * static_cast<double>(hq);
  const double tf = flop / (t.median() * 1e-3) / 1e12;
  const std::string date = bench::utc_now();
  std::printf("%s, %s; median of %d runs after %d warm-up; FLOPs 4 * pairs * D * Hq\n",
              device_name(*ctx).c_str(), date.c_str(), o.iters, o.warmup);
  bench::Report rep(fmt::format(
      "windowed attention: the refiner's range list ({}x{}x{} latent blocks, radius {}/{}/{}), "
      "{} {}/{}x{}",
      w.block_t, w.block_h, w.block_w, w.radius_t, w.radius_h, w.radius_w, o.dtype, hq, hkv, d));
  rep.row();
  rep.set("layout",
          o.small ? std::string("small") : fmt::format("{} s {}x{}", o.seconds, o.height, o.width));
  rep.set("grid T,H,W", fmt::format("{},{},{}", l.T, l.H, l.W));
  rep.set("tokens", L);
  rep.set("video", l.video());
  rep.set("tail", l.audio + l.text);
  rep.set("range pairs", static_cast<int64_t>(rows.size()));
  rep.set("q groups", groups);
  rep.set("segments", static_cast<int64_t>(plan.segments.size()));
  rep.set("attended pairs", plan.pairs);
  rep.set("of L^2", static_cast<double>(plan.pairs) / (static_cast<double>(L) * L), 4);
  rep.set("ms", t.median(), 2);
  rep.set("spread ms", t.max() - t.min(), 2);
  rep.set("TFLOP/s", tf, 3);
  rep.set("q/k/v/out GiB", bench::gib(io_bytes));
  rep.set("peak GiB", bench::gib(peak));
  rep.emit(o.json);
  if (!o.dump_ranges.empty())
    std::printf("wrote %zu range pairs to %s\n", rows.size(), o.dump_ranges.c_str());
  return 0;
}

}  // namespace

Run add_bench_windowed_attention(CLI::App& bench) {
  auto o = std::make_shared<WinOptions>();
  auto* cmd = bench.add_subcommand(
      "windowed-attention",
      "One call of the MAGI-2 refiner's windowed attention at the range list the reference builds\n"
      "(default: a 10 s clip at 1080p, the release's refiner config; heads from the config, GQA\n"
      "32/8 x 128): ms, TFLOP/s over attended pairs (4 * pairs * D * Hq), peak memory.\n"
      "Example: avdit bench windowed-attention --dump-ranges /tmp/ranges.json --json /tmp/w.json\n"
      "         python bench/peers/windowed_attention_peer.py --ranges /tmp/ranges.json");
  cmd->add_option("--device", o->device, "cuda, or cpu (the float32 reference op; use --small)")
      ->capture_default_str();
  cmd->add_option("--config", o->config,
                  "The refiner config (default: the shared reference-configs/magi2/"
                  "magi2_refiner.json, \"extends\" resolved)");
  cmd->add_option("--seconds", o->seconds, "Clip length")->capture_default_str();
  cmd->add_option("--height", o->height, "Refiner height in pixels")->capture_default_str();
  cmd->add_option("--width", o->width, "Refiner width in pixels")->capture_default_str();
  cmd->add_option("--preview-height", o->preview_height, "Preview height (fixes T)")
      ->capture_default_str();
  cmd->add_option("--preview-width", o->preview_width, "Preview width")->capture_default_str();
  cmd->add_option("--text-tokens", o->text_tokens, "Text tokens in the tail")
      ->capture_default_str();
  cmd->add_flag("--small", o->small,
                "A 9x8x24 latent grid (2x2x6 blocks) instead of the clip: the CPU path, the "
                "peer's --check");
  cmd->add_option("--dtype", o->dtype, "q/k/v/out dtype")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}))
      ->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed runs (median reported)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the row as JSON here");
  cmd->add_flag("--plan-only", o->plan_only,
                "Print the layout's tokens, range pairs and attended pairs without running the "
                "call");
  cmd->add_option("--dump-ranges", o->dump_ranges,
                  "Write the range list (and the shapes) as JSON here, for the torch peer");
  cmd->add_option("--dump-io", o->dump_io,
                  "Write q, k, v and avdit's output (float32 .bin) and meta.json into this folder "
                  "(small layouts), for the peer's --check");
  return [o]() -> int { return run_windowed_attention(*o); };
}

}  // namespace avdit::app
