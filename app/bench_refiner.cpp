// `avdit bench refiner`: one refiner step at full width without a checkpoint: the release's
// refiner config (30 layers, hidden 4,096, GQA 32/8 x 128) with random weights drawn on the
// device, at the layout of a 10 s clip at 1080p; the step is what refine() runs per UniPC step,
// the conditional and the negative prompt's forward. Prints a memory table (weights, the two
// plans, the step's peak) and the time of a forward and of a step.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/report.h"
#include "bench_commands.h"
#include "context.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "models/magi2/refiner/config.h"
#include "models/magi2/refiner/model.h"
#include "ops/context.h"
#include "ops/random.h"
#include "refiner_layout.h"

namespace avdit::app {
namespace {

namespace refiner = models::magi2::refiner;

struct RefinerBenchOptions {
  std::string device = "cuda";
  std::string config;  // default: the shared reference config
  std::string precision = "bf16";
  double seconds = 10;
  int64_t height = 1088, width = 1920;
  int64_t preview_height = 512, preview_width = 896;
  int64_t text_tokens = 1000, negative_tokens = 1000;
  bool small = false;
  int iters = 2, warmup = 1;
  uint64_t seed = 0;
  int64_t layers = 0;  // 0: the config's
  std::string json;
};

int run_refiner(const RefinerBenchOptions& o) {
  AVDIT_REQUIRE(o.iters >= 1 && o.warmup >= 0, "bench refiner: --iters >= 1 and --warmup >= 0");
  AVDIT_REQUIRE(o.text_tokens >= 0 && o.negative_tokens >= 0 && o.text_tokens <= 100000 &&
                    o.negative_tokens <= 100000,
                "bench refiner: --text-tokens / --negative-tokens: expected 0 to 100000");
  nlohmann::json merged;
  refiner::RefinerConfig rc = refiner::read_refiner_config(
      o.config.empty()
          ? std::filesystem::path(AVDIT_SHARED_DIR) / "reference-configs/magi2/magi2_refiner.json"
          : std::filesystem::path(o.config),
      &merged);
  // Fewer layers keep a device call short while the attention kernel is slow; every layer does
  // the same work, so time scales with the count and the activation peak is one layer's.
  if (o.layers > 0) {
    AVDIT_REQUIRE(o.layers <= rc.num_layers, "bench refiner: --layers {}: the config has {}",
                  o.layers, rc.num_layers);
    rc.num_layers = o.layers;
  }
  int64_t T = 9, H = 8, W = 24;  // --small
  if (!o.small) {
    const RefinerGrid g = refiner_clip_grid(merged, rc, o.seconds, o.preview_height,
                                            o.preview_width, o.height, o.width, "bench refiner");
    T = g.T, H = g.H, W = g.W;
  }
  const DType act = activation_dtype(o.precision);
  const std::unique_ptr<ops::Context> ctx = make_context(o.device);
  auto in_use = [&] { return ctx->is_cuda() ? ctx->pool_in_use() : host_rss_peak(); };

  const auto t_load = std::chrono::steady_clock::now();
  const refiner::RefinerModel model(*ctx, rc, act, o.seed);
  ctx->synchronize();
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  const int64_t after_weights = in_use();

  const Shape video_shape = {1, rc.video_in_channels, T, H, W};
  const refiner::RefinerPlan cond = model.plan(video_shape, 0, o.text_tokens);
  const refiner::RefinerPlan uncond = model.plan(video_shape, 0, o.negative_tokens);
  Tensor video = ctx->empty(video_shape, DType::F32);
  Tensor text = ctx->empty({1, o.text_tokens, rc.text_in_channels}, DType::F32);
  Tensor null_text = ctx->empty({1, o.negative_tokens, rc.text_in_channels}, DType::F32);
  const Tensor audio = ctx->zeros({1, 0, rc.audio_in_channels}, DType::F32);
  ops::fill_normal(*ctx, video, 1, 0.f, 1.f);
  ops::fill_normal(*ctx, text, 2, 0.f, 1.f);
  ops::fill_normal(*ctx, null_text, 3, 0.f, 1.f);
  ctx->synchronize();
  const int64_t after_plans = in_use();

  // A step: the two forwards of refine()'s CFG; each velocity is freed before the next starts.
  bench::Timing forward, step;
  ctx->reset_pool_peak();
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    { const auto v = model.velocity(cond, video, audio, text); }
    ctx->synchronize();
    const auto t1 = std::chrono::steady_clock::now();
    { const auto u = model.velocity(uncond, video, audio, null_text); }
    ctx->synchronize();
    const auto t2 = std::chrono::steady_clock::now();
    if (i < o.warmup) continue;
    forward.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    step.ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
  }
  const int64_t peak = ctx->is_cuda() ? ctx->pool_peak() : host_rss_peak();

  const std::string date = bench::utc_now();
  std::printf("%s, %s; random weights (seed %llu) made in %.1f s; median of %d steps after %d\n",
              ctx->is_cuda() ? "cuda" : "cpu", date.c_str(), static_cast<unsigned long long>(o.seed),
              load_s, o.iters, o.warmup);
  bench::Report rep(fmt::format(
      "refiner step: {} layers, hidden {}, {}/{}x{} heads, {} activations, cond {} + negative {} "
      "text tokens",
      rc.num_layers, rc.hidden_size, rc.num_heads_q, rc.num_heads_kv, rc.head_dim, o.precision,
      o.text_tokens, o.negative_tokens));
  rep.row();
  rep.set("layers", rc.num_layers);
  rep.set("grid T,H,W", fmt::format("{},{},{}", T, H, W));
  rep.set("tokens", cond.tokens());
  rep.set("weights GiB", bench::gib(model.weight_bytes()));
  rep.set("after weights GiB", bench::gib(after_weights));
  rep.set("plans + inputs GiB", bench::gib(after_plans - after_weights));
  rep.set("step peak GiB", bench::gib(peak));
  rep.set("activations GiB", bench::gib(peak - after_plans));
  rep.set("forward ms", forward.median(), 1);
  rep.set("step ms", step.median(), 1);
  rep.set("spread ms", step.max() - step.min(), 1);
  rep.emit(o.json);
  return 0;
}

}  // namespace

Run add_bench_refiner(CLI::App& bench) {
  auto o = std::make_shared<RefinerBenchOptions>();
  auto* cmd = bench.add_subcommand(
      "refiner",
      "One MAGI-2 refiner step (the conditional and the negative forward) at full width with\n"
      "random weights made on the device, at a 10 s 1080p clip's layout: memory table and time.\n"
      "Example: avdit bench refiner --json /tmp/refiner.json");
  cmd->add_option("--device", o->device, "cuda, or cpu (with --small and a small --config)")
      ->capture_default_str();
  cmd->add_option("--config", o->config,
                  "The refiner config (default: the shared reference-configs/magi2/"
                  "magi2_refiner.json, \"extends\" resolved)");
  cmd->add_option("--precision", o->precision, "Activations: bf16 or fp32")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  cmd->add_option("--seconds", o->seconds, "Clip length")->capture_default_str();
  cmd->add_option("--height", o->height, "Refiner height in pixels")->capture_default_str();
  cmd->add_option("--width", o->width, "Refiner width in pixels")->capture_default_str();
  cmd->add_option("--preview-height", o->preview_height, "Preview height (fixes T)")
      ->capture_default_str();
  cmd->add_option("--preview-width", o->preview_width, "Preview width")->capture_default_str();
  cmd->add_option("--text-tokens", o->text_tokens, "Prompt tokens")->capture_default_str();
  cmd->add_option("--negative-tokens", o->negative_tokens, "Negative prompt tokens")
      ->capture_default_str();
  cmd->add_flag("--small", o->small, "A 9x8x24 latent grid instead of the clip");
  cmd->add_option("--iters", o->iters, "Timed steps (median reported)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed steps first")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random weights")->capture_default_str();
  cmd->add_option("--layers", o->layers,
                  "Run only the first N layers (default: all of the config's; time per layer "
                  "scales)");
  cmd->add_option("--json", o->json, "Also write the row as JSON here");
  return [o]() -> int { return run_refiner(*o); };
}

}  // namespace avdit::app
