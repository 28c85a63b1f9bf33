// CPU timings of the MAGI-2 text encoder, on demand only (DISABLED_: run with
// --gtest_also_run_disabled_tests): tokens/s on the tiny golden's longest case, and per-layer
// times at full width (Qwen3.5-27B's text config) on random weights, from which the 62-layer
// encode of a 300-token prompt is estimated. Timings are printed, never asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "models/text/qwen35/encoder.h"
#include "ops/context.h"

namespace avdit::models::text::qwen35 {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The time between consecutive layer outputs (the first from the RoPE table, just before layer 0).
class LayerClock final : public Probe {
 public:
  bool wants(const Point& p) const override { return p.is("rope") || p.is("layer{}.out"); }
  void on(ops::Context&, const Point& p, Tensor&) override {
    const auto now = Clock::now();
    if (p.is("layer{}.out")) layer_s.push_back(std::chrono::duration<double>(now - last).count());
    last = now;
  }
  Clock::time_point last;
  std::vector<double> layer_s;
};

TEST(Qwen35TextSpeed, DISABLED_GoldenLongestCase) {
  const auto tiny = std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "te-magi2-qwen35-tiny";
  ops::CpuContext ctx;
  const auto enc = open_qwen35_text(ctx, tiny);
  const Tensor t = read_all(tiny / "inputs.safetensors").at("case5.input_ids").to(DType::I64);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < t.numel(); ++i) ids.push_back(static_cast<int32_t>(t.data<int64_t>()[i]));
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = Clock::now();
    enc->encode(ids);
    runs.push_back(seconds_since(t0));
  }
  std::sort(runs.begin(), runs.end());
  std::printf("tiny golden case5: T=%zu, %d threads: median %.2f ms (min %.2f) -> %.0f tokens/s\n",
              ids.size(), default_thread_count(), runs[3] * 1e3, runs[0] * 1e3,
              ids.size() / runs[3]);
}

// Qwen3.5-27B's text config (the golden README's "real model" column); a small vocabulary, since
// the embedding lookup costs nothing and its 2.5 GB would not fit the timing's memory budget.
Qwen35TextConfig full_width_config() {
  Qwen35TextConfig c;
  c.vocab_size = 1024;
  c.hidden_size = 5120;
  c.intermediate_size = 17408;
  c.num_hidden_layers = 64;
  for (int64_t i = 0; i < 64; ++i)
    c.layer_types.push_back((i + 1) % 4 == 0 ? LayerType::FullAttention
                                             : LayerType::LinearAttention);
  c.num_attention_heads = 24;
  c.num_key_value_heads = 4;
  c.head_dim = 256;
  c.linear_num_key_heads = 16;
  c.linear_num_value_heads = 48;
  c.linear_key_head_dim = 128;
  c.linear_value_head_dim = 128;
  return c;
}

TEST(Qwen35TextSpeed, DISABLED_FullWidthLayers300Tokens) {
  const Qwen35TextConfig c = full_width_config();
  ops::CpuContext ctx;
  // One period of the layer pattern: three Gated DeltaNet layers, then one gated attention layer.
  const int64_t layers = 4;
  auto t0 = Clock::now();
  Qwen35TextEncoder enc(ctx, c, random_text_weights(ctx, c, layers, 7), "random full width");
  std::printf("random weights of %lld layers: %.1f s\n", static_cast<long long>(layers),
              seconds_since(t0));
  std::vector<int32_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37) % c.vocab_size);
  std::vector<double> lin, full;
  for (int r = 0; r < 2; ++r) {
    LayerClock clock;
    ProbeScope scope(ctx.observer(), &clock);
    t0 = Clock::now();
    clock.last = t0;
    const Tensor out = enc.encode(ids);
    const double total = seconds_since(t0);
    ASSERT_EQ(out.shape(), (Shape{300, 5120}));
    std::printf("run %d: %.2f s for %lld layers:", r, total, static_cast<long long>(layers));
    for (double s : clock.layer_s) std::printf(" %.2f", s);
    std::printf("\n");
    if (r == 1) {  // the second run: pages and the pool warm
      lin.assign(clock.layer_s.begin(), clock.layer_s.begin() + 3);
      full.assign(clock.layer_s.begin() + 3, clock.layer_s.end());
    }
  }
  const double t_lin = (lin[0] + lin[1] + lin[2]) / 3, t_full = full[0];
  // The consumed state runs layers 0..61: 47 Gated DeltaNet and 15 gated attention layers.
  const double est = 47 * t_lin + 15 * t_full;
  std::printf(
      "full width, 300 tokens, %d threads: DeltaNet layer %.2f s, attention layer %.2f s "
      "-> 62 layers ~ %.0f s, %.1f tokens/s\n",
      default_thread_count(), t_lin, t_full, est, 300 / est);
}

}  // namespace
}  // namespace avdit::models::text::qwen35
