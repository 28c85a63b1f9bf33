// Line plots for `avdit score` (error by step on a log axis, SNR by step), drawn into an RGB raster
// with a built-in 5x7 font (so no font dependency) and written as PNG (io/media/png_writer.h).
// Each series keeps one colour across the panels; values that cannot be drawn (NaN, and zero or
// negative on a log axis) break the line and are counted in the legend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace avdit::score {

struct Series {
  std::string name;
  std::vector<double> y;  // one value per x: x_first, x_first + 1, ... (the panel's)
};

struct Panel {
  std::string title;
  bool log_y = false;
  std::vector<Series> series;
  std::string x_label = "step";
  int64_t x_first = 1;  // the x value of each series' first point
};

struct Raster {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * 3 bytes per row
};

// The panels stacked vertically.
Raster draw_line_plot(const std::vector<Panel>& panels);

// Whether this build can write PNGs (the media libraries were found).
bool can_write_png();
// PNG of the raster (atomically); RuntimeFailure when the build has no PNG writer.
void write_png_file(const std::string& path, const Raster& r, const std::string& description);

}  // namespace avdit::score
