// What router statistics say (`avdit routes analyze`): never-selected (layer, head, expert) pairs
// per run and across runs, effective experts per head, top-N coverage, each modality's high-mass
// set and their overlaps, how much a global or a modality-aware ranking keeps of each modality,
// early vs late and cond vs uncond utilisation, and the gap CDF. Every figure is a function of the
// integer counts alone, so the same files give the same report.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/routes/route_stats.h"

namespace avdit::analysis::routes {

inline constexpr int64_t kCoverageTops[2] = {128, 192};

using Pair = std::array<int64_t, 3>;  // (block index, head, expert)

struct RouteAnalysis {
  RouteShape shape;
  std::vector<std::string> files;
  int64_t runs = 0;  // runs over all files
  std::vector<std::vector<Pair>> dead_per_file;
  std::vector<Pair> dead_union, dead_all;  // dead in some file; dead in every file (= the sum)
  // [layer][head]: exp(entropy) of the selection distribution; index 0 all tokens, 1 + m modality
  // m (0 where that modality made no selection).
  std::array<std::vector<std::vector<double>>, 1 + kModalities> effective;
  // Share of a head's selections its top N experts take (N capped at the experts), mean over
  // layers and heads; per layer (mean over heads).
  std::array<double, 2> coverage{};
  std::array<std::vector<double>, 2> coverage_by_layer;
  // [modality][layer][head]: the high-mass set, the smallest set of experts holding >= 90% of the
  // modality's selections (largest counts first, ties to the lower index), ascending; empty when
  // the modality made none there.
  std::array<std::vector<std::vector<std::vector<int64_t>>>, kModalities> high_mass;
  std::array<double, kModalities> high_mass_size{};  // mean size over (layer, head)
  std::array<std::optional<double>, 3> jaccard;      // video-audio, video-text, audio-text
  // Share of each modality's selections that the top-N experts of a ranking rule hold
  // ([rule][N index][modality]; rules global, modality), summed over layers and heads.
  std::array<std::array<std::array<std::optional<double>, kModalities>, 2>, 2> kept_share;
  std::optional<double> early_late_cosine, cond_uncond_cosine;  // mean over (layer, head)
  int early_bin = -1, late_bin = -1;  // the first and last step bins with rows
  std::array<double, 2> gap_cdf{};    // share of gaps < 1e-3, < 1e-2
  int64_t gaps = 0;                   // (row, head) pairs in the histogram
};

// files: one or more statistics of one model (BadInput naming the file that is of another shape).
RouteAnalysis analyze_routes(const std::vector<RouteStats>& files,
                             const std::vector<std::string>& names);

// The report's JSON (keys listed in README's `avdit routes` row) and markdown.
nlohmann::json routes_json(const RouteAnalysis& a);
std::string routes_markdown(const RouteAnalysis& a);

}  // namespace avdit::analysis::routes
