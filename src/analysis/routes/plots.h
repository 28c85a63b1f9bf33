// PNG plots of router statistics (`avdit routes analyze --plots DIR`), drawn as plain rasters (no
// font: what the axes and colours mean goes into each PNG's text chunks): effective experts by
// layer, the gap CDF, a utilisation heat map per layer, and each route map over the latent grid.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/routes/analysis.h"
#include "analysis/routes/route_stats.h"

namespace avdit::analysis::routes {

// Whether this build can write PNGs (the media writers need libpng).
bool route_plots_available();

// Writes into dir (made if missing): effective_experts.png, gap_cdf.png, utilisation_<layer>.png
// for each MoE layer of `merged`, and route_map_<file>_<layer>_<head>_<step>.png for each route map
// of each file. With `frames` ([F, 3, H, W] in [-1, 1]: the decoded clip of files[0]'s run), its
// route maps are also drawn over the decoded frames (route_frames_0_<layer>_<head>_<step>.png;
// latent frame t over decoded frame t (F - 1) / (T - 1)). Returns the files written. RuntimeFailure
// in a build without the media writers.
std::vector<std::filesystem::path> write_route_plots(const std::filesystem::path& dir,
                                                     const RouteAnalysis& a,
                                                     const RouteStats& merged,
                                                     const std::vector<RouteStats>& files,
                                                     const Tensor& frames = {});

}  // namespace avdit::analysis::routes
