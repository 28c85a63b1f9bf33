// `avdit bench text`: one prompt through a pipeline's text encoder at full width with random
// weights made on the GPU: MiniMax-H3's (the Qwen3-VL-32B text path, the residual after 50 of its
// 64 layers) or MAGI-2's (Qwen3.5-27B's text model, hidden_states[-3]: 62 of 64 layers). The median
// encode time of --tokens token prompts, weights and tokens/s. The peer is transformers' own text
// model on the same config and layer count (bench/peers/text_peer.py), run in the same device call.
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
#include "context.h"
#include "core/observer.h"
#include "models/text/qwen35/encoder.h"
#include "models/text/qwen3vl/encoder.h"
#include "run_checks.h"
#if AVDIT_HAVE_CUDA
#include "backend/cuda/point_timer.h"
#endif

namespace avdit::app {
namespace {

struct TextBenchOptions {
  std::string encoder = "qwen3vl";
  std::string config;   // default: the encoder's full-size config (below)
  int64_t layers = 0;   // default: the layers its pipeline runs
  std::string tokens = "300";
  int iters = 5;
  int warmup = 1;
  std::string precision = "bf16";
  std::string device = "cuda";
  uint64_t seed = 1;
  std::string json;
};

std::string default_config(const std::string& encoder) {
  return encoder == "qwen35"
             ? std::string(AVDIT_SOURCE_DIR) + "/bench/configs/qwen35_27b_text_config.json"
             : std::string(AVDIT_SHARED_DIR) + "/reference-configs/h3/FL2VA/text_encoder/config.json";
}

#if AVDIT_HAVE_CUDA
void print_split(ops::Context& ctx, const models::text::TextEncoder& enc,
                 const std::vector<int32_t>& ids, int64_t layer) {
  // Where the time goes, from a separate observed encode: CUDA events at the embedding, at
  // every layer's output and at the middle layer's inner points (an event is enqueued when the
  // host reaches it, so host stalls show up as gaps too); the tail is the host wall clock after
  // the last layer (download and widening).
  ops::PointTimer timer(
      [layer](const Point& p) { return p.is("embed") || p.is("layer{}.out") || p.index == layer; });
  double observed_ms = 0;
  {
    const ProbeScope scope(ctx.observer(), &timer);
    ctx.synchronize();
    const auto s = std::chrono::steady_clock::now();
    timer.start(ctx);
    const Tensor out = enc.encode(ids);
    observed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
  }
  std::string inner;
  std::vector<double> layers_ms;
  double prelude_ms = 0, marked_ms = 0, since_out = 0;
  for (const auto& [p, ms] : timer.take()) {
    marked_ms += ms;
    if (p.is("embed")) {
      prelude_ms = ms;
      continue;
    }
    since_out += ms;
    if (p.index == layer && !p.is("layer{}.out")) inner += fmt::format(" {} {:.3f};", p.str(), ms);
    if (p.is("layer{}.out")) {
      if (p.index == layer) inner += fmt::format(" {} {:.3f};", p.str(), ms);
      layers_ms.push_back(since_out);
      since_out = 0;
    }
  }
  std::sort(layers_ms.begin(), layers_ms.end());
  fmt::print(
      "tokens {}: before layer 0 {:.2f} ms; layers {} x median {:.3f} ms (min {:.3f}, max {:.3f}, "
      "sum {:.2f}); after the last layer {:.2f} ms; observed encode {:.2f} ms\n",
      ids.size(), prelude_ms, layers_ms.size(), layers_ms.empty() ? 0.0 : layers_ms[layers_ms.size() / 2],
      layers_ms.empty() ? 0.0 : layers_ms.front(), layers_ms.empty() ? 0.0 : layers_ms.back(),
      marked_ms - prelude_ms, observed_ms - marked_ms, observed_ms);
  fmt::print("tokens {} layer {} (ms from the previous point):{}\n", ids.size(), layer, inner);
}
#endif

int run(const TextBenchOptions& o) {
  namespace q = models::text::qwen3vl;
  namespace q35 = models::text::qwen35;
  const bool magi2 = o.encoder == "qwen35";
  const nlohmann::json cfg = read_json(o.config.empty() ? default_config(o.encoder) : o.config);
  const int64_t layers = o.layers > 0 ? o.layers : magi2 ? 62 : 50;
  const DType act = o.precision == "bf16" ? DType::BF16 : DType::F32;
  std::vector<int64_t> lengths;
  std::stringstream ss(o.tokens);
  for (std::string item; std::getline(ss, item, ',');) lengths.push_back(parse_int64(item, "--tokens"));
  const std::unique_ptr<ops::Context> context = make_context(o.device);
  ops::Context& ctx = *context;
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<models::text::TextEncoder> enc;
  int64_t bytes = 0, vocab = 0;
  if (magi2) {
    const q35::Qwen35TextConfig config = q35::parse_qwen35_text_config(cfg);
    AVDIT_REQUIRE(layers >= 1 && layers <= config.num_hidden_layers,
                  "--layers {}: the model has {}", layers, config.num_hidden_layers);
    q35::Qwen35TextWeights w = q35::random_text_weights(ctx, config, layers, o.seed, &bytes);
    vocab = config.vocab_size;
    enc = std::make_unique<q35::Qwen35TextEncoder>(ctx, config, std::move(w), "random weights", act);
  } else {
    const q::Qwen3VLTextConfig config = q::Qwen3VLTextConfig::from_json(cfg);
    vocab = config.vocab_size;
    auto e = std::make_unique<q::Qwen3VLTextEncoder>(ctx, config, layers, act, o.seed);
    bytes = e->weight_bytes();
    enc = std::move(e);
  }
  ctx.synchronize();
  const double make_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("{}: weights {:.2f} GB made in {:.1f} s\n", enc->describe(), bytes / 1e9, make_s);
  bench::Report report(fmt::format("{}, {}",
                                   magi2 ? "Qwen3.5 text model (MAGI-2's encoder)"
                                         : "Qwen3-VL text path (MiniMax-H3's encoder)",
                                   ctx.name()));
  for (int64_t T : lengths) {
    AVDIT_REQUIRE(T >= 1 && T <= 65536, "--tokens {}: expected 1 to 65536", T);
    std::vector<int32_t> ids(static_cast<size_t>(T));
    for (int64_t i = 0; i < T; ++i)
      ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % vocab);
    bench::Timing t;
    for (int i = 0; i < o.warmup + o.iters; ++i) {
      ctx.synchronize();
      const auto s = std::chrono::steady_clock::now();
      const Tensor out = enc->encode(ids);  // returns on the host: includes the device sync
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
      if (i >= o.warmup) t.ms.push_back(ms);
    }
    const int64_t peak = ctx.pool_peak();
#if AVDIT_HAVE_CUDA
    if (ctx.is_cuda()) print_split(ctx, *enc, ids, layers / 2);
#endif
    report.row();
    report.set("tokens", T);
    report.set("layers", layers);
    report.set("precision", o.precision);
    report.set("encode ms", t.median(), 2);
    report.set("min ms", t.min(), 2);
    report.set("tokens/s", T / (t.median() / 1e3), 0);
    report.set("weights GB", bytes / 1e9, 2);
    report.set("pool peak GB", peak / 1e9, 2);
  }
  report.emit(o.json);
  return 0;
}

}  // namespace

Run add_bench_text(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "text",
      "A text encoder at full width, random bf16 weights made on the device: MiniMax-H3's (Qwen3-VL\n"
      "text path) or MAGI-2's (Qwen3.5): median encode time per prompt length.\n"
      "Peer: bench/peers/text_peer.py. Example: avdit bench text --encoder qwen35 --tokens 300,1000");
  auto o = std::make_shared<TextBenchOptions>();
  cmd->add_option("--encoder", o->encoder, "qwen3vl (MiniMax-H3) or qwen35 (MAGI-2)")
      ->check(CLI::IsMember({"qwen3vl", "qwen35"}))
      ->capture_default_str();
  cmd->add_option("--config", o->config,
                  "Text encoder config.json (default: the full-size config of --encoder)");
  cmd->add_option("--layers", o->layers, "Layers run (default: H3 50 of 64, MAGI-2 62 of 64)");
  cmd->add_option("--tokens", o->tokens, "Comma-separated prompt lengths")->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed runs (median reported)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str();
  cmd->add_option("--precision", o->precision, "bf16 or fp32 activations")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  cmd->add_option("--device", o->device, "cuda, or cpu (the oracle: slow at full width; use few --layers)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Weights' seed")->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the rows as JSON here");
  return [o]() -> int {
    return run(*o);
  };
}

}  // namespace avdit::app
