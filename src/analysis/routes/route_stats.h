// Router statistics of MAGI-2 runs: how often each (MoE layer, head, expert) was chosen, split by
// modality, by CFG pass and by step bin, and the histogram of the gap between the K-th and the
// (K+1)-th biased score (how close each choice came to flipping); their file form
// (`avdit generate --route-stats`), reading with checks, and the deterministic merge of runs.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace avdit {
class OutputFile;
}

namespace avdit::analysis::routes {

inline constexpr int kModalities = 3;  // video, audio, text (time tokens count as text)
inline constexpr int kPasses = 2;      // the conditional item, the unconditional item
inline constexpr int kClasses = kModalities * kPasses;  // a row's class: modality * 2 + pass
inline constexpr int kStepBins = 10;  // equal bins of the denoise: step s of n is in bin 10 s / n
inline constexpr const char* kModalityNames[kModalities] = {"video", "audio", "text"};
inline constexpr const char* kPassNames[kPasses] = {"cond", "uncond"};

// Gap histogram edges 10^(-6 + i / 10), i = 0 .. 60, as float32: bin 0 holds gaps below 1e-6
// (ties included), bin i in 1 .. 60 gaps in [edge[i-1], edge[i]), bin 61 gaps of 1 or more.
inline constexpr int kGapEdges = 61;
inline constexpr int kGapBins = kGapEdges + 1;
const std::vector<float>& gap_edges();
// Index of the edge 10^e for e in -6 .. 0 (the gap CDF's points 1e-3 and 1e-2: edges 30 and 40).
inline constexpr int gap_edge_of_power(int e) { return (e + 6) * 10; }

// What a set of statistics is of; two sets merge only when these agree.
struct RouteShape {
  std::vector<int64_t> layers;  // the MoE layers' block indices (block.layers.{i} in the names)
  int64_t heads = 0, experts = 0, top_k = 0;
  int64_t moe_layers() const { return static_cast<int64_t>(layers.size()); }
  bool operator==(const RouteShape&) const = default;
  std::string str() const;  // "MoE layers 2,3 x 2 heads x 16 experts, top 3"
};

// One `--route-maps LAYER:HEAD:STEP` point: the experts each row chose there.
struct RouteMap {
  int64_t layer = 0, head = 0, step = 0;  // block index, head, 0-based step
  Tensor experts;                         // I32 [rows, K], rows in the model's order (below)
};

struct RouteStats {
  RouteShape shape;
  // I64 [moe_layers, heads, 3 modalities, 2 passes, 10 step bins, experts]: selections.
  Tensor counts;
  // I64 [moe_layers, heads, 3, 2, kGapBins]: (row, head) pairs by the gap of their K-th choice.
  Tensor gap_hist;
  // I64 [3, 2, 10]: rows of each class each forward saw, summed over forwards (counted once, not
  // per layer or head): a layer's counts sum to its rows x heads x top_k.
  Tensor rows;
  std::vector<int64_t> steps;  // the step count of each run merged here
  // The route maps of one run, and what they are drawn over: row_class I32 [rows] (modality * 2 +
  // pass of each row, in the model's modality-sorted order: video, audio, text, each in packed
  // order, so the conditional item's video rows come first, in (t, h, w) order) and the video
  // token grid of one item (t, h, w).
  std::vector<RouteMap> maps;
  Tensor row_class;
  std::array<int64_t, 3> video_grid{};

  static RouteStats zeros(const RouteShape& shape);
  int64_t runs() const { return static_cast<int64_t>(steps.size()); }
  // Flat index into counts / gap_hist.
  int64_t count_index(int64_t l, int64_t h, int m, int p, int b, int64_t e) const;
  int64_t gap_index(int64_t l, int64_t h, int m, int p, int g) const;
};

// Writes the statistics as one safetensors file, atomically (io/output_file.h); the tensors and
// metadata are listed at the top of route_stats.cpp.
void write_route_stats(const std::filesystem::path& path, const RouteStats& stats);
// Into an OutputFile the caller publishes with the run's other outputs (publish_together).
void write_route_stats(OutputFile& out, const RouteStats& stats);

// Reads and checks a file written by write_route_stats: BadInput naming the file and the tensor or
// field that is missing, of the wrong dtype or shape, or inconsistent (negative counts, counts
// that do not add up to rows x heads x top_k).
RouteStats read_route_stats(const std::filesystem::path& path);

// The sum of runs of one model: counts, histograms, rows added (exact integers, the same result in
// any order); route maps dropped unless one run is given. BadInput naming both files when their
// shapes differ (statistics of different configs). names: the files, for messages.
RouteStats merge_route_stats(const std::vector<RouteStats>& runs,
                             const std::vector<std::string>& names);

}  // namespace avdit::analysis::routes
