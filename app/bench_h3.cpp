// `avdit bench h3`: one forward of the full-width MiniMax-H3 transformer (config from
// ../shared/reference-configs, 50 blocks, random weights generated on the GPU) at given packed
// row counts and at the 864x480x56-frame canvas of the model's docs; the median forward, one
// block's time split into attention / GEMMs / the rest (CUDA events around each step), weights and
// peak activation bytes, against the PyTorch port's figures (TARGETS.md). Markdown and --json.
// --check DIR writes the h3-tiny golden's packed bf16 inputs and avdit's outputs for the peer's
// equality check (bench/peers/h3_peer.py --check).
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/report.h"
#include "bench_commands.h"
#include "context.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/h3/config.h"
#include "models/h3/packing.h"
#include "run_checks.h"
#include "range_report_options.h"

#if AVDIT_HAVE_CUDA
#include "backend/cuda/context.h"
#include "backend/cuda/point_timer.h"
#include "backend/cuda/timer.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "ops/random.h"
#include "ops/rows.h"
#endif

namespace avdit::app {
namespace {

struct H3BenchOptions {
  std::string rows = "19456,40128";
  std::string attention_plan = "default";
  bool canvas = true;
  int64_t text_len = 512;
  int iters = 5;
  int warmup = 1;
  std::string precision = "bf16";
  std::string fp16_fix = "all";
  bool timed_segments = true;
  int gemm_candidates = 8;
  int64_t blocks = 0;  // 0: the config's
  std::string config = std::string(AVDIT_SHARED_DIR) + "/reference-configs/h3/FL2VA/transformer/config.json";
  std::string json;
  std::string check;
  std::string golden = std::string(AVDIT_SHARED_DIR) + "/golden/h3-tiny";
  uint64_t seed = 1;
  bool range_monitor = false;
};

#if AVDIT_HAVE_CUDA
namespace mh = ::avdit::models::h3;

// A synthetic packed sequence of exactly `rows` live rows: `text` text rows, 2 x `audio_t` audio
// rows, the rest video; two timesteps (video, audio), one document. Positions follow the
// reference's pattern loosely (they only feed the RoPE tables).
mh::PackedLayout synthetic_layout(int64_t rows, int64_t text, int64_t audio_t) {
  mh::PackedLayout l;
  AVDIT_REQUIRE(rows > text + 2 * audio_t && rows % mh::kPackedAlignment == 0,
                "bench h3: --rows {} must be a multiple of 64 above {} text + audio rows", rows, text + 2 * audio_t);
  l.text_len = text;
  l.audio_t = audio_t;
  l.seq_len = l.used_len = rows;
  const int64_t audio = 2 * audio_t, video = rows - text - audio;
  l.positions.resize(3 * rows);
  l.token_tags.resize(rows);
  l.input_ids.assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r) {
    if (r < text) {
      l.text_pos.push_back(r);
      l.token_tags[r] = 1;
      l.positions[3 * r] = static_cast<double>(r);
    } else if (r < text + audio) {
      l.audio_pos.push_back(r);
      l.token_tags[r] = 2;
      l.positions[3 * r] = static_cast<double>(text + (r - text) % audio_t);
    } else {
      const int64_t v = r - text - audio;
      l.img_pos.push_back(r);
      l.target_img_pos.push_back(r);
      l.token_tags[r] = 0;
      l.positions[3 * r] = static_cast<double>(text + v / 1024) * 5.0 / 3.0;
      l.positions[3 * r + 1] = static_cast<double>((v / 32) % 32);
      l.positions[3 * r + 2] = static_cast<double>(v % 32);
    }
  }
  l.video_rows = video;
  l.audio_rows = audio;
  l.update_mask.assign(video, 1);
  l.update_audio_mask.assign(audio, 1);
  l.cu_seqlens = {0, rows, rows};
  l.refiner_cu_seqlens = {0, text, text};
  return l;
}

Tensor random_rows(ops::Context& ctx, int64_t n, int64_t w, uint64_t seed, DType dt) {
  Tensor t = ctx.empty({n, w}, dt);
  ops::fill_normal(ctx, t, seed, 0.f, 1.f);
  return t;
}

// Attention FLOPs of one block (4 L^2 heads dh per document) and GEMM FLOPs (2 S N K).
double attention_flop(const mh::PackedLayout& l, const mh::H3Config& c) {
  double f = 0;
  for (size_t i = 0; i + 1 < l.cu_seqlens.size(); ++i) {
    const double n = static_cast<double>(l.cu_seqlens[i + 1] - l.cu_seqlens[i]);
    f += 4.0 * n * n * static_cast<double>(c.num_attention_heads * c.attention_head_dim);
  }
  return f;
}
double gemm_flop(int64_t S, const mh::H3Config& c) {
  const double H = c.hidden_size, I = c.inner_dim(), F = c.ffn_hidden_size;
  return 2.0 * static_cast<double>(S) * (3 * I * H + H * I + 2 * F * H + F * H);
}

int run_check(const H3BenchOptions& o) {
  ops::CudaContext ctx;
  const Checkpoint ckpt = Checkpoint::open(o.golden);
  const mh::H3Model model(ctx, ckpt, DType::BF16);
  const TensorMap in = read_all(std::filesystem::path(o.golden) / "inputs.safetensors");
  const TensorMap got = mh::forward_from_inputs(model, in, /*dump=*/true);
  TensorMap out;
  for (const char* name : {"hidden_embed", "adaln_input", "rope_cos_sin_cache", "hidden_block0", "final_video_all",
                           "final_audio_all"})
    out[name] = got.at(name);
  out["mod_rows"] = got.at("combined_indices");
  out["inverse"] = got.at("inverse_indices");
  out["cu_seqlens"] = got.at("cu_seqlens").to(DType::I64);
  std::filesystem::create_directories(o.check);
  const auto path = std::filesystem::path(o.check) / "h3_check.safetensors";
  write_safetensors(path, out);
  fmt::print("wrote {} (h3-tiny, bf16, {} rows)\n", path.string(), got.at("combined_indices").numel());
  return 0;
}

// The category of the stretch of a block that ends at this point (H3Model's named points).
const char* category(const Point& p) {
  for (const char* g : {"block{}_qkv", "block{}_attn_out", "block{}_mlp_up", "block{}_mlp_out"})
    if (p.is(g)) return "gemm";
  if (p.is("block{}_attn_core")) return "attention";
  return "rest";
}

struct Case {
  std::string name;
  mh::PackedLayout layout;
  double port_s = 0;  // the PyTorch port's forward (TARGETS.md), 0 = not measured there
  double target_s = 0;
};

int run_h3(const H3BenchOptions& o) {
  if (!o.check.empty()) return run_check(o);
  mh::H3Config c = mh::H3Config::from_json(read_json(o.config));
  if (o.blocks > 0) c.num_layers = o.blocks;
  // One model at a time: each precision's weights are made, measured over every case, and freed.
  std::vector<std::string> precisions;
  {
    std::stringstream ps(o.precision);
    for (std::string p; std::getline(ps, p, ',');) {
      AVDIT_REQUIRE(p == "fp32" || p == "bf16" || p == "fp16" || p == "fp8" || p == "fp8-tensor" ||
                        p == "fp8-attn",
                    "bench h3: --precision {}: fp32, bf16, fp16, fp8, fp8-tensor or fp8-attn", p);
      precisions.push_back(p);
    }
  }
  AVDIT_REQUIRE(!precisions.empty(), "bench h3: --precision names no precision");
  const models::Fp16Fixes fixes = models::parse_fp16_fixes(o.fp16_fix);

  std::vector<Case> cases;
  std::stringstream ss(o.rows);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    const int64_t rows = parse_int64(item, "bench h3: --rows");
    Case k{fmt::format("rows {}", rows), synthetic_layout(rows, o.text_len, 186)};
    if (rows == 19456) k.port_s = 2.44, k.target_s = 1.88;
    if (rows == 40128) k.port_s = 7.11, k.target_s = 5.5;
    cases.push_back(std::move(k));
  }
  if (o.canvas) {
    // 864x480, 56 frames: latent 17 x 30 x 54 (16x spatial, 17k+5 frames -> 5k+2), Ta = 93.
    cases.push_back({"canvas 864x480x56f", mh::pack_layout(o.text_len, 17, 30, 54, 93)});
  }

  ops::CudaContext ctx;
  ctx.set_timed_choices(o.gemm_candidates, o.timed_segments);
  set_attention_plan(ctx, o.attention_plan);
  cuda::Device& dev = ctx.dev();
  bench::Report rep("MiniMax-H3 forward, one H200");
  for (const std::string& precision : precisions) {
    const DType act = precision == "fp32" ? DType::F32 : precision == "fp16" ? DType::F16 : DType::BF16;
    fmt::print("H3 bench: {} blocks, H {}, {} heads x {}, ffn {}, {} weights{}\n", c.num_layers, c.hidden_size,
               c.num_attention_heads, c.attention_head_dim, c.ffn_hidden_size, precision,
               act == DType::F16 ? " (fp16 fixes: " + models::fp16_fixes_str(fixes) + ")" : std::string());
    mh::H3Model model(ctx, c, act, o.seed);
    model.set_fp16_fixes(fixes);
    // fp8: bf16 with every block GEMM in e4m3 (row or tensor scales), quantized in the warm-up;
    // fp8-attn: fp8-tensor with the attention cores in e4m3 too (ops/attention_fp8.h).
    if (precision == "fp8") model.set_fp8_gemm(ops::Fp8Scaling::Row);
    if (precision == "fp8-tensor" || precision == "fp8-attn") model.set_fp8_gemm(ops::Fp8Scaling::Tensor);
    model.set_fp8_attention(precision == "fp8-attn");
    fmt::print("weights {:.2f} GB generated on the device\n", model.weight_bytes() / 1e9);
    for (const Case& k : cases) {
      const mh::PackedLayout& l = k.layout;
      const mh::PackedTimesteps ts = mh::pack_timesteps(l, 0.37f, 0.61f);
      const size_t tuned_before = ctx.gemm().tune_log().size(), timed_before = ctx.segment_timings().size();
      const mh::H3Plan plan = model.plan(l);
      const Tensor mod_rows = ops::index_tensor(ctx, mh::adaln_rows(l, ts)), inverse = ops::index_tensor(ctx, ts.inverse);
      const Tensor text = random_rows(ctx, l.text_len, c.hidden_size, o.seed + 11, act);
      const Tensor video = random_rows(ctx, static_cast<int64_t>(l.img_pos.size()), c.video_patch_dim(), o.seed + 12,
                                       DType::F32);
      const Tensor audio = random_rows(ctx, static_cast<int64_t>(l.audio_pos.size()), c.audio_latents_dim, o.seed + 13,
                                       DType::F32);
      // The adaLN tables alone: a sampler pays them once per step (new t), the forwards of one step
      // (CFG branches) share them; the timed forwards below reuse one set.
      mh::H3Tables tables;
      const bench::Timing tables_t = cuda::time_on_stream(dev, [&] { tables = model.tables(ts.unique); }, 1, 3);
      auto forward = [&] { model.forward(plan, tables, mod_rows, inverse, text, video, audio); };
      forward();  // the GEMM and attention plans (timed choices are made here)
      dev.synchronize();
      for (size_t i = tuned_before; i < ctx.gemm().tune_log().size(); ++i) {
        const auto& r = ctx.gemm().tune_log()[i];
        fmt::print("GEMM [{}, {}] x [{}, {}]^T: {} candidates, heuristic's first {:.3f} ms, chosen #{} {:.3f} ms ({:.0f} "
                   "TFLOP/s)\n",
                   r.m, r.k, r.n, r.k, r.tried, r.first_ms, r.chosen, r.best_ms,
                   r.best_ms > 0 ? 2.0 * r.m * r.n * r.k / (r.best_ms * 1e-3) / 1e12 : 0.0);
      }
      for (size_t i = timed_before; i < ctx.segment_timings().size(); ++i) {
        const auto& t = ctx.segment_timings()[i];
        fmt::print("attention plan {} at {} rows: {:.3f} ms per core\n",
                   ops::segment_plan_name(t.plan), t.rows, t.ms);
      }
      const int64_t before = ctx.pool_in_use();
      ctx.reset_pool_peak();
      const bench::Timing fwd = cuda::time_on_stream(dev, forward, o.warmup, o.iters);
      const int64_t peak_act = ctx.pool_peak() - before;
      // One block's split: events at the block's named points (a separate, observed forward).
      const int64_t block = c.num_layers / 2;
      ops::PointTimer timer([block](const Point& p) { return p.index == block && std::strncmp(p.name, "block", 5) == 0; });
      {
        const ProbeScope scope(ctx.observer(), &timer);
        forward();
      }
      double att_ms = 0, gemm_ms = 0, rest_ms = 0;
      std::string line = fmt::format("{} block {} steps (ms):", k.name, block);
      bool started = false;
      for (const auto& [p, ms] : timer.take()) {
        if (!started) {  // the stretch before the block's first point belongs to the previous block
          started = p.is("block{}_attn_in");
          continue;
        }
        const std::string cat = category(p);
        (cat == "attention" ? att_ms : cat == "gemm" ? gemm_ms : rest_ms) += ms;
        line += fmt::format(" {} {:.2f};", p.str(), ms);
      }
      fmt::print("{}\n", line);
      const double block_ms = att_ms + gemm_ms + rest_ms;
      const double s = fwd.median() / 1e3;
      rep.row();
      rep.set("case", k.name);
      rep.set("rows", l.seq_len);
      rep.set("live", l.used_len);
      rep.set("precision", act == DType::F16 ? precision + " (" + models::fp16_fixes_str(fixes) + ")" : precision);
      rep.set("layout", std::string(ops::segment_plan_name(plan.segments.plan)));
      rep.set("gemm cands", static_cast<int64_t>(o.gemm_candidates));
      rep.set("forward s", s, 3);
      rep.set("spread ms", fwd.max() - fwd.min(), 1);
      rep.set("adaLN tables ms", tables_t.median(), 2);
      rep.set("block ms", block_ms, 2);
      rep.set("attn ms", att_ms, 2);
      rep.set("attn %", block_ms > 0 ? 100 * att_ms / block_ms : 0.0, 0);
      rep.set("attn TFLOP/s", att_ms > 0 ? attention_flop(l, c) / (att_ms * 1e-3) / 1e12 : 0.0, 0);
      rep.set("gemm ms", gemm_ms, 2);
      rep.set("gemm %", block_ms > 0 ? 100 * gemm_ms / block_ms : 0.0, 0);
      rep.set("gemm TFLOP/s", gemm_ms > 0 ? gemm_flop(l.seq_len, c) / (gemm_ms * 1e-3) / 1e12 : 0.0, 0);
      rep.set("rest ms", rest_ms, 2);
      rep.set("rest %", block_ms > 0 ? 100 * rest_ms / block_ms : 0.0, 0);
      rep.set("weights GB", model.weight_bytes() / 1e9, 2);
      rep.set("peak act GB", peak_act / 1e9, 2);
      rep.set("port s", k.port_s, 2);
      rep.set("port / avdit", k.port_s > 0 ? k.port_s / s : 0.0, 2);
      rep.set("target s", k.target_s, 2);
      if (o.range_monitor) bench_range_monitor(ctx, c.num_layers, forward, o.warmup, o.iters, s, rep);
    }
  }
  rep.emit(o.json);
  return 0;
}
#endif

}  // namespace

Run add_bench_h3(CLI::App& bench) {
  auto o = std::make_shared<H3BenchOptions>();
  auto* cmd = bench.add_subcommand(
      "h3",
      "One forward of the full-width MiniMax-H3 DiT (random weights made on the GPU) at packed row\n"
      "counts and the 864x480x56-frame canvas: median forward, one block split into attention / GEMMs /\n"
      "the rest, weights and peak activations, vs the PyTorch port. Example: avdit bench h3 --rows 19456");
  cmd->add_option("--rows", o->rows, "Comma-separated packed row counts (multiples of 64)")->capture_default_str();
  cmd->add_flag("--canvas,!--no-canvas", o->canvas, "Also the 864x480x56-frame canvas")->capture_default_str();
  cmd->add_option("--text-len", o->text_len, "Text rows of each case")->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed forwards (median reported)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed forwards first")->capture_default_str();
  cmd->add_option("--attention-plan", o->attention_plan,
                  "The attention path for every call: default (timed split / ragged), split, ragged "
                  "or own (the project's Hopper kernel where it applies)")
      ->check(CLI::IsMember({"default", "split", "ragged", "own"}))
      ->capture_default_str();
  cmd->add_option("--precision", o->precision,
                  "bf16, fp32, fp16 (the fp16 recipe), fp8 / fp8-tensor (bf16 with the block GEMMs in e4m3, "
                  "row or tensor scales), fp8-attn (fp8-tensor with the attention cores in e4m3 too: cuDNN's "
                  "FP8 SDPA), or a comma-separated list measured one after the other")
      ->capture_default_str();
  cmd->add_option("--fp16-fix", o->fp16_fix, "fp16's fixes: all, none or a list (see avdit generate --help)")
      ->capture_default_str();
  cmd->add_flag("--timed-segments,!--no-timed-segments", o->timed_segments,
                "Time the two attention document plans (split: first document dense + the rest ragged; ragged) once "
                "per layout and keep the faster (off: split)")
      ->capture_default_str();
  cmd->add_option("--gemm-candidates", o->gemm_candidates,
                  "Time this many cuBLASLt candidates per block GEMM shape when planning (0: heuristic's first)")
      ->capture_default_str();
  cmd->add_option("--blocks", o->blocks, "Blocks (0: the config's)")->capture_default_str();
  cmd->add_option("--config", o->config, "H3 transformer config.json")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random weights")->capture_default_str();
  cmd->add_flag("--range-monitor", o->range_monitor,
                "Also time each case with the fp16 range monitor on every site (then off again); print its "
                "coverage line");
  cmd->add_option("--json", o->json, "Also write the rows as JSON here");
  cmd->add_option("--check", o->check,
                  "Instead: run the h3-tiny golden in bf16 and write its packed inputs and avdit's outputs to "
                  "DIR/h3_check.safetensors for bench/peers/h3_peer.py --check");
  cmd->add_option("--golden", o->golden, "The h3-tiny golden folder (for --check)")->capture_default_str();
  return [o]() -> int {
#if AVDIT_HAVE_CUDA
    AVDIT_REQUIRE(o->iters >= 1 && o->warmup >= 0, "bench h3: --iters >= 1, --warmup >= 0");
    return run_h3(*o);
#else
    bench_needs_cuda("h3");
#endif
  };
}

}  // namespace avdit::app
