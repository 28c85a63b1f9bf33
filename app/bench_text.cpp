// `avdit bench text`: one prompt through MiniMax-H3's text encoder (the Qwen3-VL-32B text path,
// the residual after 50 of its 64 layers) at full width with random weights made on the GPU: the
// median encode time of --tokens token prompts, weights and tokens/s. The peer is transformers'
// own Qwen3-VL text model on the same config and layer count (bench/peers/text_peer.py), run in
// the same device call.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/report.h"
#include "bench_commands.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/text/qwen3vl/config.h"
#include "run_checks.h"
#if AVDIT_HAVE_CUDA
#include "backend/cuda/context.h"
#include "backend/cuda/point_timer.h"
#include "core/observer.h"
#include "models/text/qwen3vl/encoder.h"
#endif

namespace avdit::app {
namespace {

struct TextBenchOptions {
  std::string config =
      std::string(AVDIT_SHARED_DIR) + "/reference-configs/h3/FL2VA/text_encoder/config.json";
  int64_t layers = 50;
  std::string tokens = "300";
  int iters = 5;
  int warmup = 1;
  std::string precision = "bf16";
  uint64_t seed = 1;
  std::string json;
};

#if AVDIT_HAVE_CUDA
int run(const TextBenchOptions& o) {
  namespace q = models::text::qwen3vl;
  const q::Qwen3VLTextConfig config = q::Qwen3VLTextConfig::from_json(read_json(o.config));
  const DType act = o.precision == "bf16" ? DType::BF16 : DType::F32;
  std::vector<int64_t> lengths;
  std::stringstream ss(o.tokens);
  for (std::string item; std::getline(ss, item, ',');) lengths.push_back(parse_int64(item, "--tokens"));
  ops::CudaContext ctx;
  const auto t0 = std::chrono::steady_clock::now();
  const q::Qwen3VLTextEncoder enc(ctx, config, o.layers, act, o.seed);
  ctx.synchronize();
  const double make_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("{}: weights {:.2f} GB made in {:.1f} s\n", enc.describe(), enc.weight_bytes() / 1e9,
             make_s);
  bench::Report report("Qwen3-VL text path (MiniMax-H3's encoder), one H200");
  for (int64_t T : lengths) {
    AVDIT_REQUIRE(T >= 1 && T <= 65536, "--tokens {}: expected 1 to 65536", T);
    std::vector<int32_t> ids(static_cast<size_t>(T));
    for (int64_t i = 0; i < T; ++i)
      ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % config.vocab_size);
    bench::Timing t;
    for (int i = 0; i < o.warmup + o.iters; ++i) {
      ctx.synchronize();
      const auto s = std::chrono::steady_clock::now();
      const Tensor out = enc.encode(ids);  // returns on the host: includes the device sync
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
      if (i >= o.warmup) t.ms.push_back(ms);
    }
    const int64_t peak = ctx.pool_peak();
    // The middle layer's split: CUDA events at its named points (a separate, observed encode);
    // host stalls show up as gaps too, since an event is enqueued when the host reaches it.
    const int64_t layer = o.layers / 2;
    ops::PointTimer timer([layer](const Point& p) { return p.index == layer; });
    {
      const ProbeScope scope(ctx.observer(), &timer);
      timer.start(ctx);
      const Tensor out = enc.encode(ids);
    }
    std::string line = fmt::format("tokens {} layer {} (ms from the previous point):", T, layer);
    double layer_ms = 0;
    for (const auto& [p, ms] : timer.take()) {
      line += fmt::format(" {} {:.3f};", p.str(), ms);
      layer_ms += ms;
    }
    fmt::print("{} total {:.3f}\n", line, layer_ms);
    report.row();
    report.set("tokens", T);
    report.set("layers", o.layers);
    report.set("precision", o.precision);
    report.set("encode ms", t.median(), 2);
    report.set("min ms", t.min(), 2);
    report.set("tokens/s", T / (t.median() / 1e3), 0);
    report.set("weights GB", enc.weight_bytes() / 1e9, 2);
    report.set("pool peak GB", peak / 1e9, 2);
  }
  report.emit(o.json);
  return 0;
}
#endif

}  // namespace

Run add_bench_text(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "text",
      "MiniMax-H3's text encoder (Qwen3-VL text path) at full width, random bf16 weights made on\n"
      "the GPU: median encode time per prompt length. Peer: bench/peers/text_peer.py.\n"
      "Example: avdit bench text --tokens 300,1000");
  auto o = std::make_shared<TextBenchOptions>();
  cmd->add_option("--config", o->config, "Text encoder config.json")->capture_default_str();
  cmd->add_option("--layers", o->layers, "Layers run (H3: 50 of 64)")->capture_default_str();
  cmd->add_option("--tokens", o->tokens, "Comma-separated prompt lengths")->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed runs (median reported)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str();
  cmd->add_option("--precision", o->precision, "bf16 or fp32 activations")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Weights' seed")->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the rows as JSON here");
  return [o]() -> int {
#if AVDIT_HAVE_CUDA
    return run(*o);
#else
    (void)o;
    bench_needs_cuda("text");
#endif
  };
}

}  // namespace avdit::app
