// `avdit probe attention`: the attention sparsity probe (src/analysis/attention/) on an H3 run. The
// bar is given before the run and checked before any work; the answer: how much softmax mass the
// top-k keys of each video query hold against the structured pattern, per (step, block, head), the
// medians, the per-head classes and the coverage (covered N of M); JSON and a PNG (mass by block
// and head, median over the probed steps).
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "analysis/attention/probe.h"
#include "commands.h"
#include "context.h"
#include "core/error.h"
#include "io/finite.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "models/family.h"
#include "models/h3/model.h"
#include "models/h3/packing.h"
#include "pipeline/generate_h3.h"
#include "pipeline/inputs.h"
#include "pipeline/latent_shape.h"
#include "run_checks.h"
#include "score/plot.h"

namespace avdit::app {

namespace {

using nlohmann::json;

struct ProbeArgs {
  std::string model, text, latent_shape, pattern = "frame+nonvideo", k = "auto", steps_probed, out,
                                         png;
  std::string device = "cpu", precision = "fp32";
  std::optional<int> steps;
  std::optional<double> bar;
  uint64_t seed = 0;
  int64_t query_stride = 1;
  bool json = false;
};

std::set<int> parse_steps(const std::string& s, int steps) {
  std::set<int> out;
  if (s.empty()) return out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    AVDIT_REQUIRE(!item.empty() && end && *end == '\0' && v >= 0 && v < steps,
                  "--probe-steps {}: '{}' is not a step from 0 to {}", s, item, steps - 1);
    out.insert(static_cast<int>(v));
  }
  return out;
}

// Mass in [0, 1] as a colour from dark blue (0) through teal to yellow (1).
std::array<uint8_t, 3> ramp(double v) {
  if (!std::isfinite(v)) return {128, 128, 128};
  v = std::clamp(v, 0.0, 1.0);
  const double r = v < 0.5 ? 20 + 2 * v * 20 : 60 + (v - 0.5) * 2 * 190;
  const double g = 20 + v * 210;
  const double b = v < 0.5 ? 90 + v * 2 * 60 : 150 - (v - 0.5) * 2 * 130;
  return {static_cast<uint8_t>(r), static_cast<uint8_t>(g), static_cast<uint8_t>(b)};
}

// Two heat maps side by side (top-k mass | pattern mass), blocks down, heads across, each cell the
// median over the probed steps; a colour bar below.
score::Raster draw_masses(const std::vector<analysis::TripleMass>& t, int blocks, int heads) {
  std::map<std::pair<int, int>, std::pair<std::vector<double>, std::vector<double>>> cells;
  for (const auto& m : t) {
    cells[{m.block, m.head}].first.push_back(m.topk_median);
    cells[{m.block, m.head}].second.push_back(m.pattern_median);
  }
  const int64_t cell = std::clamp<int64_t>(600 / std::max(heads, 1), 4, 24), pad = 16;
  score::Raster r;
  r.width = 3 * pad + 2 * heads * cell;
  r.height = 3 * pad + blocks * cell + 12;
  r.rgb.assign(static_cast<size_t>(r.width * r.height * 3), 255);
  auto fill = [&](int64_t x0, int64_t y0, int64_t w, int64_t h, std::array<uint8_t, 3> c) {
    for (int64_t y = y0; y < y0 + h; ++y)
      for (int64_t x = x0; x < x0 + w; ++x)
        for (int ch = 0; ch < 3; ++ch)
          r.rgb[static_cast<size_t>((y * r.width + x) * 3 + ch)] = c[ch];
  };
  for (int panel = 0; panel < 2; ++panel)
    for (int b = 0; b < blocks; ++b)
      for (int h = 0; h < heads; ++h) {
        const auto it = cells.find({b, h});
        const double v = it == cells.end()
                             ? NAN
                             : analysis::median(panel == 0 ? it->second.first : it->second.second);
        fill(pad + panel * (heads * cell + pad) + h * cell, pad + b * cell, cell, cell, ramp(v));
      }
  const int64_t bar_w = r.width - 2 * pad;
  for (int64_t x = 0; x < bar_w; ++x)
    fill(pad + x, 2 * pad + blocks * cell, 1, 12, ramp(double(x) / (bar_w - 1)));
  return r;
}

int run_probe(const ProbeArgs& a) {
  AVDIT_REQUIRE(a.bar.has_value(),
                "--bar is required: the pass mark of a head's pattern mass, fixed before the run");
  AVDIT_REQUIRE(std::isfinite(*a.bar) && *a.bar > 0 && *a.bar <= 1,
                "--bar {}: the pass mark is a softmax mass, expected a number in (0, 1]", *a.bar);
  AVDIT_REQUIRE(
      a.pattern == "frame+nonvideo",
      "--pattern {}: the probe knows frame+nonvideo (a video query keeps its own frame and every "
      "non-video key)",
      a.pattern);
  int64_t fixed_k = 0;
  if (a.k != "auto") {
    char* end = nullptr;
    const long long v = std::strtoll(a.k.c_str(), &end, 10);
    AVDIT_REQUIRE(!a.k.empty() && end && *end == '\0' && v >= 1,
                  "--k {}: expected auto (the pattern's key count) or a positive integer", a.k);
    fixed_k = v;
  }
  AVDIT_REQUIRE(a.query_stride >= 1, "--queries-every {}: expected at least 1", a.query_stride);
  const Checkpoint ckpt = Checkpoint::open(a.model);
  AVDIT_REQUIRE(ckpt.config(), "{}: no config.json beside the weights", a.model);
  const auto family = models::detect_family(*ckpt.config());
  AVDIT_REQUIRE(
      family && *family == "h3",
      "{}: the attention probe runs on H3 DiTs (MAGI-2's q and k are not shown at a point: its "
      "sinks and grouped KV heads need their own mass); this config is {}",
      a.model, family.value_or("of no known family"));
  std::vector<std::filesystem::path> inputs = checkpoint_files(ckpt);
  inputs.push_back(a.text);
  if (!a.out.empty()) check_output_path(a.out, "--out", inputs);
  if (!a.png.empty()) {
    AVDIT_REQUIRE(score::can_write_png(),
                  "--png: this build has no PNG writer (libpng was not found)");
    check_output_path(a.png, "--png", inputs);
  }
  const int steps = a.steps.value_or(pipeline::kH3DefaultSteps);
  const std::set<int> probed = parse_steps(a.steps_probed, steps);

  pipeline::H3GenerateOptions o;
  o.text = pipeline::read_one_of(a.text, {"text_embeds"}, "text states [L, text_dim]");
  o.text_token_tags = pipeline::find_one_of(read_all(a.text), a.text, {"text_token_tags"});
  const pipeline::LatentShapes shapes =
      pipeline::latent_shapes_from_string("h3", *ckpt.config(), a.latent_shape);
  o.run.video_shape = shapes.video;
  o.run.audio_shape = shapes.audio;
  o.run.steps = steps;
  o.run.seed = a.seed;

  const std::unique_ptr<ops::Context> ctx = make_context(a.device);
  const models::h3::H3Model model(*ctx, ckpt, activation_dtype(a.precision));
  const models::h3::H3Config& c = model.config();
  Tensor text = o.text.tensor;
  const int64_t text_len = text.ndim() == 3 ? text.size(1) : text.size(0);
  std::vector<int64_t> tags;
  if (o.text_token_tags.defined()) {
    const Tensor v = o.text_token_tags.tensor.to(DType::I64);
    tags.assign(v.data<int64_t>(), v.data<int64_t>() + v.numel());
  }
  const models::h3::PackedLayout layout = models::h3::pack_layout(
      text_len, shapes.video[2], shapes.video[3], shapes.video[4], shapes.audio[2], {}, tags);
  analysis::SparsityOptions so;
  so.bar = *a.bar;
  so.fixed_k = fixed_k;
  so.query_stride = a.query_stride;
  so.steps = probed;
  analysis::AttentionSparsityProbe probe(analysis::h3_sparsity_layout(layout),
                                         c.num_attention_heads, c.attention_head_dim,
                                         1.0 / std::sqrt(double(c.attention_head_dim)), so);
  const auto t0 = std::chrono::steady_clock::now();
  {
    const ProbeScope scope(ctx->observer(), &probe);
    pipeline::generate_h3(model, o);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int blocks = static_cast<int>(model.weights().blocks.size());
  const int heads = static_cast<int>(c.num_attention_heads);
  const int64_t total = int64_t{steps} * blocks * heads;
  const analysis::SparsitySummary s = probe.summary(total);
  const analysis::SparsityLayout& l = probe.layout();
  const int64_t keys = l.end - l.begin, video = l.video_rows();
  const int64_t k = probe.triples().empty() ? 0 : probe.triples().front().k;
  const int64_t queries = probe.triples().empty() ? 0 : probe.triples().front().queries;
  const analysis::HeadClass* best = nullptr;
  for (const auto& h : s.heads)
    if (!best || h.pattern_median > best->pattern_median) best = &h;

  if (!a.png.empty()) {
    const score::Raster r = draw_masses(probe.triples(), blocks, heads);
    score::write_png_file(
        a.png, r,
        fmt::format("avdit probe attention: left top-{} mass, right {} pattern mass; rows "
                    "blocks 0..{}, columns heads 0..{}; median over probed steps; colour 0 "
                    "dark blue .. 1 yellow",
                    k, a.pattern, blocks - 1, heads - 1));
  }
  json j{{"family", "h3"},
         {"model", a.model},
         {"pattern", a.pattern},
         {"k", a.k == "auto" ? json("auto") : json(fixed_k)},
         {"k_used", k},
         {"keys", keys},
         {"video_rows", video},
         {"queries_per_head", queries},
         {"query_stride", a.query_stride},
         {"bar", *a.bar},
         {"steps", steps},
         {"covered", s.covered},
         {"total", s.total},
         {"topk_mass_median", s.topk_median},
         {"pattern_mass_median", s.pattern_median},
         {"heads_passing", s.passing},
         {"probe_seconds", probe.seconds()},
         {"run_seconds", seconds},
         {"device", a.device},
         {"precision", a.precision}};
  json hs = json::array(), ts = json::array();
  for (const auto& h : s.heads)
    hs.push_back({{"head", h.head},
                  {"pattern_mass_median", h.pattern_median},
                  {"topk_mass_median", h.topk_median},
                  {"pass", h.pass}});
  for (const auto& t : probe.triples())
    ts.push_back({{"step", t.step},
                  {"block", t.block},
                  {"head", t.head},
                  {"queries", t.queries},
                  {"k", t.k},
                  {"topk_mass_median", t.topk_median},
                  {"pattern_mass_median", t.pattern_median}});
  j["heads"] = hs;
  j["triples"] = ts;
  if (!a.out.empty()) write_file_atomic(a.out, j.dump(2) + "\n");
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "attention probe: h3 {}, pattern {}, k {} ({} of {} keys), bar {} (given before the run)\n",
      a.model, a.pattern, a.k == "auto" ? "auto" : a.k, k, keys, *a.bar);
  std::cout << fmt::format(
      "covered {} of {} (step, block, head); {} video queries of {} per head{}\n", s.covered,
      s.total, queries, video,
      a.query_stride > 1 ? fmt::format(" (every {}th)", a.query_stride) : "");
  std::cout << fmt::format("top-{} mass median {:.3f} (can any {}-key scheme work?)\n", k,
                           s.topk_median, k);
  std::cout << fmt::format("{} mass median {:.3f} (does this scheme work?)\n", a.pattern,
                           s.pattern_median);
  std::cout << fmt::format("heads passing (median pattern mass >= {}): {} of {}", *a.bar, s.passing,
                           s.heads.size());
  if (best) std::cout << fmt::format("; best head {} at {:.3f}", best->head, best->pattern_median);
  std::cout << fmt::format("\nprobe time {:.2f} s of a {:.2f} s run\n", probe.seconds(), seconds);
  if (!a.out.empty()) std::cout << "wrote " << a.out << "\n";
  if (!a.png.empty()) std::cout << "wrote " << a.png << "\n";
  return 0;
}

}  // namespace

Run add_probe(CLI::App& app) {
  auto* probe = app.add_subcommand("probe", "Measure a property of a model's run");
  probe->require_subcommand(1);
  auto* cmd = probe->add_subcommand("attention",
                                    "Attention sparsity (H3): per (step, block, head), the softmax "
                                    "mass of each video query's top-k "
                                    "keys and of a structured pattern, from the exact scores; "
                                    "medians and per-head pass/fail at --bar");
  auto a = std::make_shared<ProbeArgs>();
  cmd->add_option("--model", a->model, "An H3 DiT folder")->required();
  cmd->add_option("--text", a->text, "Text states (text_embeds) as `generate --text` reads them")
      ->required();
  cmd->add_option("--latent-shape", a->latent_shape, "Latent size T,H,W,A")->required();
  cmd->add_option("--pattern", a->pattern, "The structured pattern: frame+nonvideo")
      ->capture_default_str();
  cmd->add_option("--k", a->k, "Keys of the top-k: auto (the pattern's key count) or a number")
      ->capture_default_str();
  cmd->add_option("--bar", a->bar,
                  "A head passes when its median pattern mass reaches this, in (0, 1]; "
                  "fixed before the run");
  cmd->add_option("--steps", a->steps, "Sampling steps (default 49)")->check(CLI::Range(1, 10000));
  cmd->add_option("--probe-steps", a->steps_probed,
                  "Steps to probe, e.g. 0,10,19 (default: every step)");
  cmd->add_option("--queries-every", a->query_stride,
                  "Measure every n-th video query (default 1: all)");
  cmd->add_option("--seed", a->seed, "Seed of the noise")->check(uint64_string());
  cmd->add_option("--device", a->device,
                  "cpu or cuda (the model; the probe's arithmetic is on the CPU)")
      ->capture_default_str();
  cmd->add_option("--precision", a->precision, "fp32 or bf16 activations")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--out", a->out, "Write the JSON here");
  cmd->add_option("--png", a->png, "Write the mass by block and head here");
  cmd->add_flag("--json", a->json, "Print the JSON instead of the summary");
  return [a] { return run_probe(*a); };
}

}  // namespace avdit::app
