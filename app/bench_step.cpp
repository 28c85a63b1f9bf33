// `avdit bench step`: one whole sampler step of a DiT with random weights made on the device (no
// checkpoint on disk), through the code `avdit generate` runs (pipeline::generate_magi2 /
// generate_h3 and the sampler loop): the model's passes as the family's sampler makes them
// (MAGI-2: cond and uncond as two items of one packed forward, per-modality CFG, UniPC; H3: one
// pass at the release's guidance 1, two with --video-guidance / --audio-guidance, Euler per
// modality). A run takes the first warm-up + timed + 1 steps of the seed's schedule: the step time
// is the median of the timed steps (CUDA events at the loop's step points; the host clock on the
// CPU); the last step runs with marks at every layer's sub-layer points and gives the time by
// stage (attention core, routed MoE, dense GEMMs; the rest is the step minus those).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/report.h"
#include "bench_commands.h"
#include "context.h"
#include "core/error.h"
#include "core/observer.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/h3/config.h"
#include "models/h3/model.h"
#include "models/h3/packing.h"
#include "models/magi2/config.h"
#include "models/magi2/model.h"
#include "models/magi2/nvfp4_memory.h"
#include "models/magi2/packing.h"
#include "pipeline/generate_h3.h"
#include "pipeline/generate_magi2.h"
#include "pipeline/latent_shape.h"
#include "run_checks.h"
#include "sample/sampler_loop.h"

#if AVDIT_HAVE_CUDA
#include "backend/cuda/context.h"
#include "backend/cuda/point_timer.h"
#endif

namespace avdit::app {
namespace {

namespace mm = models::magi2;
namespace mh = models::h3;

struct StepBenchOptions {
  std::string family;
  std::string device = "cuda";
  std::string precision = "bf16";
  std::string fp8_scaling = "row";  // with --precision fp8
  std::string attention_plan = "default";
  bool fp8_attention = false;       // --fp8-attention
  bool nvfp4_experts = false;
  bool small = false;
  std::optional<double> seconds;
  std::optional<int64_t> height, width;
  std::string latent_shape;
  std::string rows = "19456,40128";
  bool rows_given = false;  // --rows on the command line
  bool canvas = false;
  std::optional<int64_t> text_tokens;
  std::optional<int> steps;
  int iters = 3;
  int warmup = 2;  // the first step plans, the second captures H3's CUDA graph
  std::optional<float> video_guidance, audio_guidance;
  std::string config;
  uint64_t seed = 1;
  std::string json;
};

// ---- marks on the context's timeline -----------------------------------------------------------

// A probe that marks the points `select` picks: CUDA events on the GPU (ops::PointTimer), the host
// clock on the CPU (whose ops have finished when the next one is called). take(): each mark with
// the milliseconds since the previous one (the first mark: since start(), or dropped without it).
class Marks : public Probe {
 public:
  explicit Marks(std::function<bool(const Point&)> select) : select_(std::move(select)) {}
  bool wants(const Point& p) const override { return select_(p); }
  virtual void start(ops::Context& ctx) = 0;
  virtual std::vector<std::pair<Point, double>> take() = 0;

 protected:
  std::function<bool(const Point&)> select_;
};

class HostMarks final : public Marks {
 public:
  using Marks::Marks;
  void start(ops::Context&) override { marks_.emplace_back(Point{"start"}, Clock::now()); }
  void on(ops::Context&, const Point& p, Tensor&) override { marks_.emplace_back(p, Clock::now()); }
  std::vector<std::pair<Point, double>> take() override {
    std::vector<std::pair<Point, double>> out;
    for (size_t i = 1; i < marks_.size(); ++i)
      out.emplace_back(marks_[i].first, std::chrono::duration<double, std::milli>(
                                            marks_[i].second - marks_[i - 1].second)
                                            .count());
    marks_.clear();
    return out;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<Point, Clock::time_point>> marks_;
};

#if AVDIT_HAVE_CUDA
class EventMarks final : public Marks {
 public:
  explicit EventMarks(const std::function<bool(const Point&)>& select)
      : Marks(select), timer_(select) {}
  void start(ops::Context& ctx) override { timer_.start(ctx); }
  void on(ops::Context& ctx, const Point& p, Tensor& t) override { timer_.on(ctx, p, t); }
  std::vector<std::pair<Point, double>> take() override {
    std::vector<std::pair<Point, double>> out;
    for (const auto& [p, ms] : timer_.take()) out.emplace_back(p, static_cast<double>(ms));
    return out;
  }

 private:
  ops::PointTimer timer_;
};
#endif

std::unique_ptr<Marks> make_marks(ops::Context& ctx, std::function<bool(const Point&)> select) {
#if AVDIT_HAVE_CUDA
  if (ctx.is_cuda()) return std::make_unique<EventMarks>(select);
#endif
  (void)ctx;
  return std::make_unique<HostMarks>(std::move(select));
}

// ---- stages ------------------------------------------------------------------------------------

// kRest collects what no other stage names; MAGI-2's mHC stretches are kept apart (they sum into
// "rest s" in the report, and each is also reported on its own).
enum Stage { kAttention = 0, kMoe, kGemm, kRest, kMhcLogits, kMhcCoef, kMhcPre, kMhcPost, kStages };

// The points that bound each family's stretches, and the stage of the stretch each one ends.
struct StagePoint {
  const char* name;
  Stage stage;
};
// MAGI-2 (models/magi2/model.cpp): the stretch before attn.{}.core_in is the pre-norm, the g and
// qkv GEMMs and the q/k prologue (norm, RoPE); mlp.{}.out ends the dense MLP when it follows
// mlp.{}.in (a dense layer) and nothing of note after moe.{}.out. Each mHC branch: mhc.{}.logits
// ends the logits (the RMS norm of the flat streams and the phi product), mhc.{}.coef the sigmoid /
// Sinkhorn epilogue, attn/mlp.{}.in the pre-mix, mhc.{}.post the hyper-connection into the streams.
constexpr StagePoint kMagi2Points[] = {
    {"mhc.{}.logits", kMhcLogits}, {"mhc.{}.coef", kMhcCoef},     {"mhc.{}.post", kMhcPost},
    {"attn.{}.in", kMhcPre},   {"attn.{}.core_in", kGemm},   {"attn.{}.core", kAttention},
    {"attn.{}.out", kGemm},    {"mlp.{}.in", kMhcPre},       {"moe.{}.norm", kRest},
    {"moe.{}.split", kGemm},  {"moe.{}.router", kMoe},    {"moe.{}.experts", kMoe},
    {"moe.{}.shared", kGemm}, {"moe.{}.specific", kGemm}, {"moe.{}.out", kGemm},
    {"mlp.{}.out", kRest},
};
// H3 (models/h3/model.cpp, as bench h3 splits a block): the stretch before block{}_attn_core is
// the QK-norm + RoPE and the core.
constexpr StagePoint kH3Points[] = {
    {"block{}_attn_in", kRest},  {"block{}_qkv", kGemm},     {"block{}_attn_core", kAttention},
    {"block{}_attn_out", kGemm}, {"block{}_mlp_in", kRest},  {"block{}_mlp_up", kGemm},
    {"block{}_mlp_act", kRest},  {"block{}_mlp_out", kGemm}, {"hidden_block{}", kRest},
};

struct StageTimes {
  double ms[kStages] = {};
  double moe_layer_ms =
      0;  // MAGI-2: the MoE sub-layers (pre-norm .. merge), for bench moe's figure
};

template <size_t N>
const StagePoint* find_point(const StagePoint (&table)[N], const Point& p) {
  for (const StagePoint& s : table)
    if (p.is(s.name)) return &s;
  return nullptr;
}

StageTimes sum_stages(bool magi2, const std::vector<std::pair<Point, double>>& marks) {
  StageTimes t;
  const Point* prev = nullptr;
  for (const auto& [p, ms] : marks) {
    const StagePoint* s = magi2 ? find_point(kMagi2Points, p) : find_point(kH3Points, p);
    Stage stage = s ? s->stage : kRest;
    if (magi2 && p.is("mlp.{}.out") && prev && prev->is("mlp.{}.in")) stage = kGemm;  // dense MLP
    t.ms[stage] += ms;
    if (magi2 && std::string_view(p.name).starts_with("moe.{}.")) t.moe_layer_ms += ms;
    prev = &p;
  }
  return t;
}

// ---- one run -----------------------------------------------------------------------------------

struct StopSteps {};  // thrown by the progress callback once the steps a run needs are done

struct StepRun {
  std::vector<double> step_ms;  // per step: marks at step.input -> step.output
  std::vector<double> loop_ms;  // per step: the sampler loop's own clock
  StageTimes stages;            // the observed (last) step
  int64_t in_use_before = 0, peak = 0;
};

// Runs `generate` (a family's generate_* with `run`) for warmup + iters + 1 steps of the schedule,
// the last one with the stage marks attached, and stops it there.
StepRun run_steps(ops::Context& ctx, bool magi2, int warmup, int iters, pipeline::RunOptions run,
                  const std::function<void(const pipeline::RunOptions&)>& generate) {
  const int total = warmup + iters + 1;
  StepRun r;
  const auto steps = make_marks(ctx, [](const Point& p) {
    return (p.is(sample::kInputPoint) && p.part == 0) ||
           (p.is(sample::kOutputPoint) && p.part == 1);
  });
  const auto stages = make_marks(ctx, [magi2](const Point& p) {
    return magi2 ? find_point(kMagi2Points, p) != nullptr : find_point(kH3Points, p) != nullptr;
  });
  std::optional<ProbeScope> stage_scope;
  run.progress = [&](int done, int, double seconds) {
    r.loop_ms.push_back(seconds * 1e3);
    if (done == total - 1) {
      // Attached between steps (never inside an observer call): the next step runs observed.
      stage_scope.emplace(ctx.observer(), stages.get());
      stages->start(ctx);
    } else if (done == total) {
      stage_scope.reset();
      throw StopSteps{};
    }
  };
  ctx.synchronize();
  r.in_use_before = ctx.pool_in_use();
  ctx.reset_pool_peak();
  {
    const ProbeScope scope(ctx.observer(), steps.get());
    try {
      generate(run);
    } catch (const StopSteps&) {
    }
    ctx.synchronize();
    r.peak = ctx.pool_peak();
  }
  for (const auto& [p, ms] : steps->take())
    if (p.is(sample::kOutputPoint)) {
      if (r.step_ms.size() <= static_cast<size_t>(p.index)) r.step_ms.resize(p.index + 1);
      r.step_ms[p.index] = ms;
    }
  AVDIT_CHECK(
      static_cast<int>(r.step_ms.size()) == total && static_cast<int>(r.loop_ms.size()) == total,
      "bench step: {} steps marked, {} by the loop, {} run", r.step_ms.size(), r.loop_ms.size(),
      total);
  r.stages = sum_stages(magi2, stages->take());
  ctx.forget_fixed();
  return r;
}

// ---- cases -------------------------------------------------------------------------------------

struct Case {
  std::string name;
  Shape video, audio;       // unpacked latents
  int64_t text_tokens = 0;  // per pass (MAGI-2: both items, padded to one length as the pipeline)
  int64_t rows = 0;         // H3 --rows: the packed rows the case must give
};

Tensor host_normal(Shape shape, uint64_t seed, uint64_t stream) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  fill_normal(t, seed, stream);
  return t;
}

double checked_seconds(double s) {
  AVDIT_REQUIRE(std::isfinite(s) && s > 0 && s <= 600,
                "--seconds {}: expected above 0 and at most 600", s);
  return s;
}

// The FLOPs of one step (2 per multiply-add). MAGI-2's per-token GEMM widths: attention (qkv, g,
// proj), dense MLP layers (up_gate, down), MoE layers' dense parts (split, shared fc1, modality fc1
// and fc2, merge with the shared fc2), the routed experts (top-k of each head: gate, up, down).
struct StepFlop {
  double attention = 0, gemm = 0, moe = 0;
};

StepFlop magi2_flop(const mm::Magi2Config& c, const std::vector<int64_t>& items) {
  StepFlop f;
  const double H = static_cast<double>(c.hidden_size), D = static_cast<double>(c.head_dim);
  const double Hq = static_cast<double>(c.num_heads_q), Hkv = static_cast<double>(c.num_heads_kv);
  double tokens = 0;
  for (int64_t n : items) {
    tokens += static_cast<double>(n);
    f.attention += 4.0 * static_cast<double>(n) * static_cast<double>(n) * Hq * D *
                   static_cast<double>(c.num_layers);
  }
  const double I = static_cast<double>(c.dense_intermediate), W = static_cast<double>(c.moe_width);
  const double Is = static_cast<double>(c.moe.shared_expert_intermediate_size);
  const double Im = static_cast<double>(c.moe.modality_specific_expert_intermediate_size);
  const double De = static_cast<double>(c.moe.expert_intermediate_size),
               Dm = static_cast<double>(c.moe_head_dim);
  double per_token = 0, routed = 0;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    per_token += (Hq + 2 * Hkv) * D * H + Hq * H + H * Hq * D;
    if (c.is_moe_layer(i)) {
      per_token += W * H + 2 * Is * H + 2 * Im * H + Im * H + H * (W + Is);
      routed += static_cast<double>(c.moe.num_heads * c.moe.top_k) * 3 * Dm * De;
    } else {
      per_token += 3 * I * H;
    }
  }
  f.gemm = 2 * tokens * per_token;
  f.moe = 2 * tokens * routed;
  return f;
}

StepFlop h3_flop(const mh::H3Config& c, const mh::PackedLayout& l, int forwards) {
  StepFlop f;
  const double H = static_cast<double>(c.hidden_size), I = static_cast<double>(c.inner_dim());
  const double F = static_cast<double>(c.ffn_hidden_size), L = static_cast<double>(c.num_layers);
  for (size_t i = 0; i + 1 < l.cu_seqlens.size(); ++i) {
    const double n = static_cast<double>(l.cu_seqlens[i + 1] - l.cu_seqlens[i]);
    f.attention += 4.0 * n * n * I * L * forwards;
  }
  f.gemm = 2.0 * static_cast<double>(l.seq_len) * (3 * I * H + H * I + 3 * F * H) * L * forwards;
  return f;
}

std::string default_config(const std::string& family, bool small) {
  const std::string shared = AVDIT_SHARED_DIR;
  if (family == "magi2")
    return small ? shared + "/golden/magi2-tiny/config.json"
                 : shared + "/reference-configs/magi2/magi2_preview.json";
  return small ? shared + "/golden/h3-tiny/config.json"
               : shared + "/reference-configs/h3/FL2VA/transformer/config.json";
}

// A row of the report with the figures both families share.
void report_row(bench::Report& rep, const StepBenchOptions& o, const Case& k,
                const std::string& cfg, int64_t tokens, const std::string& per_pass, int schedule,
                const StepRun& r, const StepFlop& f, int64_t weight_bytes, int64_t resident) {
  bench::Timing step, loop;
  for (int i = o.warmup; i < o.warmup + o.iters; ++i) {
    step.ms.push_back(r.step_ms[i]);
    loop.ms.push_back(r.loop_ms[i]);
  }
  const double s = step.median() / 1e3;
  const double att = r.stages.ms[kAttention] / 1e3, moe = r.stages.ms[kMoe] / 1e3,
               gemm = r.stages.ms[kGemm] / 1e3;
  const double rest = s - att - moe - gemm;
  const double mhc_logits = r.stages.ms[kMhcLogits] / 1e3, mhc_coef = r.stages.ms[kMhcCoef] / 1e3,
               mhc_pre = r.stages.ms[kMhcPre] / 1e3, mhc_post = r.stages.ms[kMhcPost] / 1e3;
  const double mhc = mhc_logits + mhc_coef + mhc_pre + mhc_post;
  auto pct = [&](double x) { return s > 0 ? 100 * x / s : 0.0; };
  auto rate = [](double flop, double sec) { return sec > 0 ? flop / sec / 1e12 : 0.0; };
  rep.row();
  rep.set("family", o.family);
  rep.set("case", k.name);
  rep.set("device", o.device);
  rep.set("precision", o.precision + (o.nvfp4_experts ? " + nvfp4 experts" : "") +
                           (o.precision == "fp8" ? " (" + o.fp8_scaling + " scales)" : "") +
                           (o.fp8_attention ? " + fp8 attention" : ""));
  rep.set("CFG", cfg);
  rep.set("tokens", tokens);
  rep.set("per pass", per_pass);
  rep.set("schedule", static_cast<int64_t>(schedule));
  rep.set("timed steps", static_cast<int64_t>(o.iters));
  rep.set("step s", s, 3);
  rep.set("spread ms", step.max() - step.min(), 1);
  rep.set("loop s", loop.median() / 1e3, 3);
  rep.set("attention s", att, 3);
  rep.set("moe s", moe, 3);
  rep.set("gemm s", gemm, 3);
  rep.set("rest s", rest, 3);
  rep.set("attention %", pct(att), 0);
  rep.set("moe %", pct(moe), 0);
  rep.set("gemm %", pct(gemm), 0);
  rep.set("rest %", pct(rest), 0);
  if (o.family == "magi2") {  // the parts of rest
    rep.set("mhc s", mhc, 3);
    rep.set("mhc logits s", mhc_logits, 3);
    rep.set("mhc coef s", mhc_coef, 3);
    rep.set("mhc pre s", mhc_pre, 3);
    rep.set("mhc post s", mhc_post, 3);
    rep.set("rest other s", rest - mhc, 3);
  }
  rep.set("moe sub-layer s", r.stages.moe_layer_ms / 1e3, 3);
  rep.set("attention TFLOP", f.attention / 1e12, 1);
  rep.set("gemm TFLOP", f.gemm / 1e12, 1);
  rep.set("moe TFLOP", f.moe / 1e12, 1);
  rep.set("attention TFLOP/s", rate(f.attention, att), 0);
  rep.set("gemm TFLOP/s", rate(f.gemm, gemm), 0);
  rep.set("moe TFLOP/s", rate(f.moe, moe), 0);
  rep.set("observed step s", r.step_ms.back() / 1e3, 3);
  rep.set("weights GB", weight_bytes / 1e9, 2);
  rep.set("resident GB", resident / 1e9, 2);
  rep.set("peak GB", r.peak / 1e9, 2);
  rep.set("activations GB", (r.peak - r.in_use_before) / 1e9, 2);
}

#if AVDIT_HAVE_CUDA
int64_t device_free_bytes() {
  size_t free = 0, total = 0;
  AVDIT_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(free);
}
#endif

// ---- MAGI-2 ------------------------------------------------------------------------------------

int run_magi2(const StepBenchOptions& o, ops::Context& ctx, const nlohmann::json& cfg, DType act,
              bench::Report& rep) {
  AVDIT_REQUIRE(!o.rows_given && !o.canvas,
                "--rows and --canvas are H3's cases; MAGI-2 takes --seconds, --height, "
                "--width or --latent-shape");
  const mm::Magi2Config c = mm::parse_magi2_config(cfg);
  const pipeline::Magi2SamplerDefaults defaults = pipeline::magi2_sampler_defaults(c);
  Case k;
  pipeline::LatentShapes shapes;
  if (!o.latent_shape.empty()) {
    AVDIT_REQUIRE(!o.seconds && !o.height && !o.width,
                  "--latent-shape and --seconds/--height/--width both set the size");
    shapes = pipeline::latent_shapes_from_string("magi2-preview", cfg, o.latent_shape);
    k.name = "latent " + o.latent_shape;
  } else if (o.small && !o.seconds && !o.height && !o.width) {
    shapes = pipeline::latent_shapes_from_string("magi2-preview", cfg, "2,4,6,10");
    k.name = "latent 2,4,6,10";
  } else {
    // As generate sizes a run: round(seconds * fps * 2) frames (app/generate_clip.cpp).
    const double seconds = checked_seconds(o.seconds.value_or(10.0));
    const int64_t h = o.height.value_or(512), w = o.width.value_or(896);
    const int64_t frames =
        std::max<int64_t>(1, std::llround(seconds * pipeline::magi2_fps(cfg) * 2.0));
    shapes = pipeline::magi2_latent_shapes(cfg, frames, h, w);
    k.name = fmt::format("{}x{}, {} s ({} frames)", w, h, seconds, frames);
  }
  k.video = shapes.video;
  k.audio = shapes.audio;
  k.text_tokens = o.text_tokens.value_or(o.small ? 8 : 1000);
  AVDIT_REQUIRE(k.text_tokens >= 1 && k.text_tokens <= 100000,
                "--text-tokens {}: expected 1 to 100000", k.text_tokens);

  sample::Magi2Guidance g = defaults.guidance;
  if (o.video_guidance) g.video_scale = *o.video_guidance;
  if (o.audio_guidance) g.audio_scale = *o.audio_guidance;
  const bool cfg_on = g.video_scale != 1.0f || g.audio_scale != 1.0f;
  const int schedule = o.steps.value_or(std::max(defaults.steps, o.warmup + o.iters + 1));
  AVDIT_REQUIRE(o.warmup + o.iters + 1 <= schedule,
                "--warmup {} + --iters {} + 1 observed step need {} steps of the schedule; --steps "
                "{} has fewer",
                o.warmup, o.iters, o.warmup + o.iters + 1, schedule);

  // The packed forward's tokens, as packing_index counts them: per item T/pT * H/pH * W/pW video,
  // every audio row, the text (both items at one padded length, as the pipeline hands them over).
  const int64_t pt = c.data_proxy.t_patch_size, ps = c.data_proxy.patch_size;
  const int64_t video_tokens = (k.video[2] / pt) * (k.video[3] / ps) * (k.video[4] / ps);
  const int64_t audio_tokens = k.audio[1];
  const int items = cfg_on ? 2 : 1;
  const int64_t per_item = video_tokens + audio_tokens + k.text_tokens;
  std::vector<int64_t> item_tokens(items, per_item);
  const int64_t tokens = per_item * items;
  if (o.small) {  // cheap here: check the count against the packing itself
    const mm::PackingIndex idx = mm::packing_index(
        c, k.video, k.audio, std::vector<int64_t>(items, k.text_tokens), k.text_tokens);
    AVDIT_CHECK(idx.layout.modality.size() == static_cast<size_t>(tokens),
                "bench step: {} tokens counted, {} packed", tokens, idx.layout.modality.size());
  }
  fmt::print(
      "magi2 {}: latent video {} audio {}; per item {} video + {} audio + {} text = {} tokens; {} "
      "item{} in "
      "one packed forward = {} tokens\n",
      k.name, shape_str(k.video), shape_str(k.audio), video_tokens, audio_tokens, k.text_tokens,
      per_item, items, items > 1 ? "s (cond, uncond)" : "", tokens);

  mm::LoadOptions load;
  load.nvfp4_experts = o.nvfp4_experts;
  if (o.precision == "fp8") load.fp8_gemm = ops::parse_fp8_scaling(o.fp8_scaling, "--fp8-scaling");
  load.fp8_attention = o.fp8_attention;
#if AVDIT_HAVE_CUDA
  if (ctx.is_cuda()) {
    const mm::Nvfp4ResidentEstimate e = mm::nvfp4_resident_estimate(c, tokens);
    const int64_t need = o.nvfp4_experts
                             ? e.weight_bytes
                             : e.other_weight_bytes + mm::nvfp4_memory_counts(c).bf16_bytes;
    const int64_t free = device_free_bytes();
    AVDIT_REQUIRE(
        need < free, "MAGI-2's weights need about {:.1f} GB{}, the device has {:.1f} GB free{}",
        need / 1e9, o.nvfp4_experts ? " (routed experts in NVFP4)" : " (routed experts in bf16)",
        free / 1e9, o.nvfp4_experts ? "" : ": add --nvfp4-experts (4.5 bits per expert weight)");
  }
#endif
  const auto t0 = std::chrono::steady_clock::now();
  const mm::Magi2Model model(ctx, c, act, o.seed, load);
  ctx.synchronize();
  const double made_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t resident = ctx.pool_in_use();
  fmt::print(
      "magi2: {} layers ({} MoE), hidden {}, {} heads x {}, MoE {} heads x {} experts top-{}; "
      "random weights "
      "{:.2f} GB{} made in {:.1f} s (seed {})\n",
      c.num_layers, c.moe.moe_layers.size(), c.hidden_size, c.num_heads_q, c.head_dim,
      c.moe.num_heads, c.moe.num_experts, c.moe.top_k, model.weight_bytes() / 1e9,
      o.nvfp4_experts ? " (routed experts NVFP4)" : "", made_s, o.seed);

  pipeline::RunOptions run;
  run.steps = schedule;
  run.seed = o.seed;
  run.video_shape = k.video;
  run.audio_shape = k.audio;
  const int64_t ct = c.text_in_channels;
  pipeline::Magi2GenerateOptions go;
  go.text = {host_normal({1, k.text_tokens, ct}, o.seed, 21), "random text features"};
  go.negative = {host_normal({1, k.text_tokens, ct}, o.seed, 22), "random negative text features"};
  go.video_guidance = g.video_scale;
  go.audio_guidance = g.audio_scale;
  const StepRun r =
      run_steps(ctx, /*magi2=*/true, o.warmup, o.iters, run, [&](const pipeline::RunOptions& ro) {
        pipeline::Magi2GenerateOptions x = go;
        x.run = ro;
        pipeline::generate_magi2(model, x);
      });
  const std::string cfg_text =
      cfg_on ? fmt::format("cond + uncond, one packed forward (video {}, audio {})", g.video_scale,
                           g.audio_scale)
             : "cond only (guidance 1)";
  report_row(
      rep, o, k, cfg_text, tokens,
      fmt::format("{} x ({} v + {} a + {} t)", items, video_tokens, audio_tokens, k.text_tokens),
      schedule, r, magi2_flop(c, item_tokens), model.weight_bytes(), resident);
  return 0;
}

// ---- H3 ----------------------------------------------------------------------------------------

// --rows R: a latent of T frames on the 768x1344 canvas's 48x84 grid and bench h3's 186 audio
// steps, the text taking the remainder, so that the packed sequence has exactly R rows.
Case h3_rows_case(const mh::H3Config& c, int64_t R) {
  constexpr int64_t kH = 48, kW = 84, kAudioT = 186, kMinText = 64;
  const int64_t per_frame = (kH / c.patch_size[1]) * (kW / c.patch_size[2]);
  const int64_t audio_rows = mh::kAudioChannels * kAudioT;
  AVDIT_REQUIRE(
      R % mh::kPackedAlignment == 0 && R >= audio_rows + kMinText + per_frame && R <= 1000000,
      "--rows {}: expected a multiple of {} from {} to 1000000", R, mh::kPackedAlignment,
      audio_rows + kMinText + per_frame);
  const int64_t T = (R - audio_rows - kMinText) / per_frame;
  Case k;
  k.rows = R;
  k.text_tokens = R - T * per_frame - audio_rows;
  k.video = {1, c.latents_dim, T, kH, kW};
  k.audio = {mh::kAudioChannels, c.audio_latents_dim, kAudioT};
  k.name = fmt::format("rows {}", R);
  return k;
}

int run_h3(const StepBenchOptions& o, ops::Context& ctx, const nlohmann::json& cfg, DType act,
           bench::Report& rep) {
  AVDIT_REQUIRE(!o.nvfp4_experts,
                "--nvfp4-experts packs MAGI-2's routed experts; MiniMax-H3 has no experts");
  const mh::H3Config c = mh::H3Config::from_json(cfg);
  const bool sized = o.seconds || o.height || o.width || !o.latent_shape.empty();
  AVDIT_REQUIRE(o.latent_shape.empty() || !(o.seconds || o.height || o.width),
                "--latent-shape and --seconds/--height/--width both set the size");
  std::vector<Case> cases;
  if (o.small) {
    AVDIT_REQUIRE(
        !o.rows_given,
        "--rows sizes the full-width cases; --small runs one tiny latent (--latent-shape)");
    Case k;
    const std::string spec = o.latent_shape.empty() ? "2,4,6,10" : o.latent_shape;
    if (o.latent_shape.empty() && (o.seconds || o.height || o.width)) {
      const double seconds = checked_seconds(o.seconds.value_or(5.0));
      const double n = std::max(0.0, std::round((seconds * 24.0 - 5.0) / 17.0));
      const int64_t frames = 17 * static_cast<int64_t>(n) + 5;
      const pipeline::LatentShapes s =
          pipeline::h3_latent_shapes(cfg, frames, o.height.value_or(768), o.width.value_or(1344));
      k.video = s.video, k.audio = s.audio, k.name = fmt::format("{} frames", frames);
    } else {
      const pipeline::LatentShapes s = pipeline::latent_shapes_from_string("h3", cfg, spec);
      k.video = s.video, k.audio = s.audio, k.name = "latent " + spec;
    }
    k.text_tokens = o.text_tokens.value_or(8);
    cases.push_back(k);
  } else {
    if (o.rows_given || !(sized || o.canvas)) {
      std::stringstream ss(o.rows);
      for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) cases.push_back(h3_rows_case(c, parse_int64(item, "--rows")));
    }
    if (sized || o.canvas) {
      Case k;
      if (!o.latent_shape.empty()) {
        const pipeline::LatentShapes s =
            pipeline::latent_shapes_from_string("h3", cfg, o.latent_shape);
        k.video = s.video, k.audio = s.audio, k.name = "latent " + o.latent_shape;
      } else {
        // As generate sizes a run: the 17n + 5 frame grid nearest to seconds at 24 fps.
        const double seconds = checked_seconds(o.seconds.value_or(5.0));
        const int64_t h = o.height.value_or(768), w = o.width.value_or(1344);
        const double n = std::max(0.0, std::round((seconds * 24.0 - 5.0) / 17.0));
        const int64_t frames = 17 * static_cast<int64_t>(n) + 5;
        const pipeline::LatentShapes s = pipeline::h3_latent_shapes(cfg, frames, h, w);
        k.video = s.video, k.audio = s.audio;
        k.name = fmt::format("{}x{}, {} s ({} frames)", w, h, seconds, frames);
      }
      k.text_tokens = o.text_tokens.value_or(512);
      cases.push_back(k);
    }
  }
  AVDIT_REQUIRE(!cases.empty(), "--rows names no row count and no canvas was asked for (--canvas)");
  for (const Case& k : cases)
    AVDIT_REQUIRE(k.text_tokens >= 1 && k.text_tokens <= 100000,
                  "{}: text tokens {}: expected 1 to 100000", k.name, k.text_tokens);

  const float gv = o.video_guidance.value_or(1.0f), ga = o.audio_guidance.value_or(1.0f);
  const bool cfg_on = gv != 1.0f || ga != 1.0f;
  const int forwards = cfg_on ? 2 : 1;
  const int schedule =
      o.steps.value_or(std::max(pipeline::kH3DefaultSteps, o.warmup + o.iters + 1));
  AVDIT_REQUIRE(o.warmup + o.iters + 1 <= schedule,
                "--warmup {} + --iters {} + 1 observed step need {} steps of the schedule; --steps "
                "{} has fewer",
                o.warmup, o.iters, o.warmup + o.iters + 1, schedule);

  const auto t0 = std::chrono::steady_clock::now();
  mh::H3Model model(ctx, c, act, o.seed);
  if (o.precision == "fp8")
    model.set_fp8_gemm(ops::parse_fp8_scaling(o.fp8_scaling, "--fp8-scaling"));
  model.set_fp8_attention(o.fp8_attention);
  ctx.synchronize();
  const double made_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t resident = ctx.pool_in_use();
  fmt::print(
      "h3: {} blocks, hidden {}, {} heads x {}, ffn {}; random weights {:.2f} GB made in {:.1f} s "
      "(seed {})\n",
      c.num_layers, c.hidden_size, c.num_attention_heads, c.attention_head_dim, c.ffn_hidden_size,
      model.weight_bytes() / 1e9, made_s, o.seed);

  for (const Case& k : cases) {
    const int64_t T = k.video[2], Hl = k.video[3], Wl = k.video[4], Ta = k.audio[2];
    const mh::PackedLayout l = mh::pack_layout(k.text_tokens, T, Hl, Wl, Ta);
    if (k.rows > 0)
      AVDIT_CHECK(l.seq_len == k.rows && l.used_len == k.rows,
                  "bench step: --rows {} packs to {} live of {} rows", k.rows, l.used_len,
                  l.seq_len);
    fmt::print(
        "h3 {}: latent video {} audio {}; {} text + {} audio + {} video = {} live rows, {} packed "
        "(x{} "
        "forward{} per step)\n",
        k.name, shape_str(k.video), shape_str(k.audio), l.text_len, l.audio_rows, l.video_rows,
        l.used_len, l.seq_len, forwards, forwards > 1 ? "s" : "");
    pipeline::RunOptions run;
    run.steps = schedule;
    run.seed = o.seed;
    run.video_shape = k.video;
    run.audio_shape = k.audio;
    pipeline::H3GenerateOptions go;
    go.text = {host_normal({k.text_tokens, c.text_dim}, o.seed, 21), "random text states"};
    go.negative = {host_normal({k.text_tokens, c.text_dim}, o.seed, 22),
                   "random negative text states"};
    go.video_guidance = gv;
    go.audio_guidance = ga;
    const StepRun r = run_steps(ctx, /*magi2=*/false, o.warmup, o.iters, run,
                                [&](const pipeline::RunOptions& ro) {
                                  pipeline::H3GenerateOptions x = go;
                                  x.run = ro;
                                  pipeline::generate_h3(model, x);
                                });
    const std::string cfg_text =
        cfg_on ? fmt::format("cond + uncond, two forwards (video {}, audio {})", gv, ga)
               : "cond only (guidance 1, the release's)";
    report_row(rep, o, k, cfg_text, l.seq_len,
               fmt::format("{} v + {} a + {} t", l.video_rows, l.audio_rows, l.text_len), schedule,
               r, h3_flop(c, l, forwards), model.weight_bytes(), resident);
  }
  return 0;
}

int run_step(const StepBenchOptions& o) {
  // fp8: bf16 activations, every block GEMM in e4m3 (attention too with --fp8-attention).
  const DType act = activation_dtype(o.precision == "fp8" ? "bf16" : o.precision);
  AVDIT_REQUIRE(o.family == "h3" || act != DType::F16,
                "--precision fp16 is MiniMax-H3's recipe; MAGI-2 runs fp32 or bf16");
  AVDIT_REQUIRE(o.iters >= 1 && o.iters <= 1000 && o.warmup >= 0 && o.warmup <= 1000,
                "--iters {} / --warmup {}: expected 1..1000 and 0..1000", o.iters, o.warmup);
  AVDIT_REQUIRE(!o.steps || (*o.steps >= 2 && *o.steps <= 10000), "--steps {}: expected 2 to 10000",
                o.steps.value_or(0));
  AVDIT_REQUIRE(!o.height || *o.height > 0, "--height must be positive");
  AVDIT_REQUIRE(!o.width || *o.width > 0, "--width must be positive");
  for (const auto& [g, name] : {std::pair{o.video_guidance, "--video-guidance"},
                                std::pair{o.audio_guidance, "--audio-guidance"}})
    AVDIT_REQUIRE(!g || std::isfinite(*g), "{} must be a finite number", name);
  AVDIT_REQUIRE(
      o.device == "cuda" || o.small || !o.config.empty(),
      "--device {}: the full-width networks run on the GPU; add --small for the tiny configs",
      o.device);
  const std::string config_path = o.config.empty() ? default_config(o.family, o.small) : o.config;
  const nlohmann::json cfg = read_json(config_path);
  const std::unique_ptr<ops::Context> ctx = make_context(o.device);
  set_attention_plan(*ctx, o.attention_plan);
  fmt::print(
      "bench step: {} on {}, {}; config {}; median of {} steps after {} warm-up, then 1 observed "
      "step\n",
      o.family, ctx->name(), bench::utc_now(), config_path, o.iters, o.warmup);
  bench::Report rep(fmt::format("{} sampler step ({})",
                                o.family == "magi2" ? "MAGI-2 preview" : "MiniMax-H3",
                                !o.config.empty() ? config_path
                                : o.small         ? "tiny config"
                                                  : "full width"));
  const int rc =
      o.family == "magi2" ? run_magi2(o, *ctx, cfg, act, rep) : run_h3(o, *ctx, cfg, act, rep);
  rep.emit(o.json);
  return rc;
}

}  // namespace

Run add_bench_step(CLI::App& bench) {
  auto o = std::make_shared<StepBenchOptions>();
  auto* cmd = bench.add_subcommand(
      "step",
      "One whole sampler step (the family's CFG passes and solver, the code avdit generate\n"
      "runs) of the full-width DiT with random weights made on the device: median step time,\n"
      "the time by stage (attention, routed MoE, dense GEMMs, rest), peak memory, the exact\n"
      "token count; --json.\n"
      "Examples: avdit bench step --family magi2 --nvfp4-experts   (896x512, 10 s)\n"
      "          avdit bench step --family h3                     (19,456 and 40,128 rows)\n"
      "          avdit bench step --family h3 --device cpu --small");
  cmd->add_option("--family", o->family, "magi2 (MAGI-2 preview) or h3 (MiniMax-H3)")
      ->required()
      ->check(CLI::IsMember({"magi2", "h3"}));
  cmd->add_option("--device", o->device, "cuda, or cpu (with --small)")->capture_default_str();
  cmd->add_option("--precision", o->precision,
                  "bf16, fp32, fp16 (H3's recipe) or fp8 (bf16 with the dense GEMMs in e4m3: H3's every "
                  "block GEMM, MAGI-2's linear_qkv, linear_proj, dense MLPs, split linear and shared experts; "
                  "the weights quantized in the first warm-up step)")
      ->capture_default_str();
  cmd->add_option("--fp8-scaling", o->fp8_scaling,
                  "With --precision fp8: row (per token and output channel) or tensor scales")
      ->check(CLI::IsMember({"row", "tensor"}))
      ->capture_default_str();
  cmd->add_option("--attention-plan", o->attention_plan,
                  "The GPU's attention path for every call: default, split, ragged (cuDNN) or own "
                  "(the project's Hopper kernel where it applies)")
      ->check(CLI::IsMember({"default", "split", "ragged", "own"}))
      ->capture_default_str();
  cmd->add_flag("--fp8-attention", o->fp8_attention,
                "Every attention core in FP8 e4m3 (cuDNN's FP8 SDPA; MAGI-2's sinks applied after its "
                "output; on the CPU its emulation), with any --precision");
  cmd->add_flag("--nvfp4-experts", o->nvfp4_experts,
                "MAGI-2: routed experts made packed in NVFP4 (needed on one H200: 217 GB in bf16)");
  cmd->add_flag("--small", o->small,
                "The tiny golden configs (../shared/golden/*-tiny) on a tiny latent");
  cmd->add_option("--seconds", o->seconds, "Clip length (MAGI-2 default 10; H3's canvas case 5)");
  cmd->add_option("--height", o->height, "Height in pixels (MAGI-2 default 512; H3 canvas 768)");
  cmd->add_option("--width", o->width, "Width in pixels (MAGI-2 default 896; H3 canvas 1344)");
  cmd->add_option("--latent-shape", o->latent_shape,
                  "The latent size directly: T,H,W,A (video frames, height, "
                  "width; audio length)");
  cmd->add_option("--rows", o->rows,
                  "H3: comma-separated packed row counts (multiples of 64), each a latent on the "
                  "768x1344 grid "
                  "with the text taking the remainder")
      ->capture_default_str()
      ->each([o](const std::string&) { o->rows_given = true; });
  cmd->add_flag("--canvas", o->canvas,
                "H3: also the canvas of --seconds/--height/--width (default 5 s, 768x1344)");
  cmd->add_option(
      "--text-tokens", o->text_tokens,
      "Text rows per pass (MAGI-2 default 1000, cond and uncond padded to one length as the "
      "pipeline does; H3 canvas 512)");
  cmd->add_option("--steps", o->steps,
                  "The schedule's length (default: the family's, MAGI-2 100, H3 49)");
  cmd->add_option("--iters", o->iters, "Timed steps (median reported)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed steps first (plans, graph capture)")
      ->capture_default_str();
  cmd->add_option("--video-guidance", o->video_guidance,
                  "Video CFG scale (default: the family's; H3 1)");
  cmd->add_option("--audio-guidance", o->audio_guidance,
                  "Audio CFG scale (default: the family's; H3 1)");
  cmd->add_option("--config", o->config,
                  "The DiT config.json (default: the release's, or the tiny one with --small)");
  cmd->add_option("--seed", o->seed, "Seed of the random weights, texts and noise")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the rows as JSON here");
  return [o]() -> int { return run_step(*o); };
}

}  // namespace avdit::app
