// `avdit routes analyze|mask`: what the router statistics of MAGI-2 runs (`avdit generate
// --route-stats`) say, and expert masks from them for `avdit generate --expert-mask`. The work
// lives in src/analysis/routes/.
#include <iostream>
#include <memory>

#include "analysis/routes/analysis.h"
#include "analysis/routes/mask.h"
#include "analysis/routes/plots.h"
#include "analysis/routes/route_stats.h"
#include "commands.h"
#include "core/error.h"
#include "io/finite.h"
#include "io/output_file.h"
#include "io/safetensors.h"

namespace avdit::app {
namespace {

namespace routes = analysis::routes;

struct RoutesArgs {
  std::vector<std::string> stats;
  bool json = false;
  std::string plots, frames;
  int64_t keep = 0;
  std::string rule, out;
};

std::vector<routes::RouteStats> read_stats(const std::vector<std::string>& files) {
  std::vector<routes::RouteStats> runs;
  for (const std::string& f : files) runs.push_back(routes::read_route_stats(f));
  return runs;
}

int run_analyze(const RoutesArgs& a) {
  const std::vector<routes::RouteStats> runs = read_stats(a.stats);
  const routes::RouteAnalysis r = routes::analyze_routes(runs, a.stats);  // checks the shapes
  std::vector<std::filesystem::path> plots;
  AVDIT_REQUIRE(a.frames.empty() || !a.plots.empty(),
                "--frames needs --plots DIR (it is drawn on)");
  if (!a.plots.empty()) {
    AVDIT_REQUIRE(routes::route_plots_available(),
                  "--plots: this avdit was built without the PNG writer (libpng)");
    Tensor frames;
    if (!a.frames.empty()) {
      const TensorMap clip = read_all(a.frames);
      auto it = clip.find("frames");
      AVDIT_REQUIRE(it != clip.end(),
                    "--frames {}: no tensor 'frames' (write the clip with avdit generate --prompt "
                    "... --out CLIP.safetensors)",
                    a.frames);
      frames = it->second;
      AVDIT_REQUIRE(frames.dtype() == DType::F32 && frames.ndim() == 4 && frames.size(1) == 3 &&
                        frames.size(0) >= 1 && frames.size(2) >= 1 && frames.size(3) >= 1 &&
                        frames.size(2) * frames.size(3) <= (int64_t{1} << 24),
                    "--frames {}: tensor frames is {} {}, expected F32 [frames, 3, H, W]", a.frames,
                    dtype_name(frames.dtype()), frames.shape_str());
      require_finite(frames, a.frames + ":frames");
    }
    plots = routes::write_route_plots(a.plots, r, routes::merge_route_stats(runs, a.stats), runs,
                                      frames);
  }
  if (a.json) {
    nlohmann::json j = routes::routes_json(r);
    j["plots"] = nlohmann::json::array();
    for (const auto& p : plots) j["plots"].push_back(p.string());
    std::cout << j.dump(1) << "\n";
  } else {
    std::cout << routes::routes_markdown(r);
    for (const auto& p : plots) std::cout << "wrote " << p.string() << "\n";
  }
  return 0;
}

int run_mask(const RoutesArgs& a) {
  std::vector<std::filesystem::path> inputs(a.stats.begin(), a.stats.end());
  check_output_path(a.out, "--out", inputs);
  const routes::KeepRule rule = routes::parse_keep_rule(a.rule);
  const std::vector<routes::RouteStats> runs = read_stats(a.stats);
  const routes::RouteStats merged = routes::merge_route_stats(runs, a.stats);
  const routes::ExpertMask mask = routes::make_expert_mask(merged, a.keep, rule);
  routes::write_expert_mask(a.out, mask);
  std::cout << fmt::format(
      "wrote {}: {} of {} experts kept per head by the {} rule, {} from {} run(s)\n", a.out,
      mask.kept, mask.shape.experts, routes::keep_rule_name(rule), mask.shape.str(), merged.runs());
  return 0;
}

}  // namespace

Run add_routes(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "routes",
      "MAGI-2 router statistics (written by avdit generate --route-stats FILE): analyze them, or\n"
      "make an expert mask for avdit generate --expert-mask.\n"
      "Example: avdit routes analyze a.safetensors b.safetensors --json --plots plots/\n"
      "Example: avdit routes mask a.safetensors --keep 192 --rule modality --out mask.safetensors");
  cmd->require_subcommand(1);
  auto a = std::make_shared<RoutesArgs>();
  auto* analyze = cmd->add_subcommand(
      "analyze",
      "Dead (layer, head, expert) pairs per file, their union and intersection; effective experts\n"
      "per head; top-128 / top-192 coverage; each modality's high-mass set and their Jaccard\n"
      "indices; early vs late and cond vs uncond cosines; the score-gap CDF. Markdown, or --json");
  analyze->add_option("stats", a->stats, "Router statistics files of one model")->required();
  analyze->add_flag("--json", a->json, "Print JSON (keys: dead_pairs, effective_experts, ...)");
  analyze->add_option("--plots", a->plots,
                      "Write PNG plots into this folder (effective experts, gap CDF, utilisation "
                      "heat maps, route maps)");
  analyze->add_option("--frames", a->frames,
                      "The decoded clip of the first file's run (generate --prompt ... --out "
                      "CLIP.safetensors): its route maps also drawn over the frames");
  auto* mask = cmd->add_subcommand(
      "mask",
      "Keep N experts per (layer, head), ranked by global utilisation or by the largest share of\n"
      "one modality's selections; the others are masked out of the router (generate\n"
      "--expert-mask)");
  mask->add_option("stats", a->stats, "Router statistics files of one model")->required();
  mask->add_option("--keep", a->keep, "Experts kept per head (top_k to experts)")->required();
  mask->add_option("--rule", a->rule, "global or modality")->required();
  mask->add_option("--out", a->out, "The mask (.safetensors)")->required();
  return [a, analyze, mask]() {
    if (analyze->parsed()) return run_analyze(*a);
    if (mask->parsed()) return run_mask(*a);
    return 2;
  };
}

}  // namespace avdit::app
