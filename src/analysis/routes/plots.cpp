// Router statistics plots (see plots.h): a small RGB canvas with lines, rectangles and a colour
// ramp, encoded by the media writers' PNG encoder.
#include "analysis/routes/plots.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "io/output_file.h"
#if AVDIT_HAVE_MEDIA
#include "io/media/png_writer.h"
#include "io/media/rgb8.h"
#endif

namespace avdit::analysis::routes {

#if AVDIT_HAVE_MEDIA
bool route_plots_available() { return true; }

namespace {

using Rgb = std::array<uint8_t, 3>;
constexpr Rgb kWhite{255, 255, 255}, kGrey{200, 200, 200}, kBlack{0, 0, 0};
// Series colours: all tokens, video, audio, text.
constexpr Rgb kSeries[4] = {{0, 0, 0}, {31, 119, 180}, {214, 39, 40}, {44, 160, 44}};
constexpr const char* kSeriesNames[4] = {"black: all tokens", "blue: video", "red: audio",
                                         "green: text"};

class Canvas {
 public:
  Canvas(int64_t w, int64_t h, Rgb fill) : w_(w), h_(h), px_(static_cast<size_t>(w * h * 3)) {
    rect(0, 0, w, h, fill);
  }
  void set(int64_t x, int64_t y, Rgb c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    std::copy(c.begin(), c.end(), px_.begin() + (y * w_ + x) * 3);
  }
  void rect(int64_t x0, int64_t y0, int64_t w, int64_t h, Rgb c) {
    for (int64_t y = y0; y < y0 + h; ++y)
      for (int64_t x = x0; x < x0 + w; ++x) set(x, y, c);
  }
  // Bresenham, two pixels thick.
  void line(int64_t x0, int64_t y0, int64_t x1, int64_t y1, Rgb c) {
    const int64_t dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int64_t sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int64_t err = dx + dy;
    for (;;) {
      set(x0, y0, c);
      set(x0 + 1, y0, c);
      set(x0, y0 + 1, c);
      if (x0 == x1 && y0 == y1) break;
      const int64_t e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }
  void write(const std::filesystem::path& path, const media::PngText& text) const {
    const std::vector<uint8_t> png = media::encode_png(px_.data(), w_, h_, text);
    write_file_atomic(path,
                      std::string_view(reinterpret_cast<const char*>(png.data()), png.size()));
  }

 private:
  int64_t w_, h_;
  std::vector<uint8_t> px_;
};

// A plot area with a frame and grey grid lines at the given fractions of each axis.
struct Area {
  int64_t x0 = 50, y0 = 20, w = 600, h = 360;
  int64_t px(double fx) const { return x0 + static_cast<int64_t>(std::lround(fx * double(w))); }
  int64_t py(double fy) const { return y0 + h - static_cast<int64_t>(std::lround(fy * double(h))); }
  void frame(Canvas& c, int xticks, int yticks) const {
    for (int i = 0; i <= xticks; ++i)
      c.line(px(double(i) / xticks), y0, px(double(i) / xticks), y0 + h, kGrey);
    for (int i = 0; i <= yticks; ++i)
      c.line(x0, py(double(i) / yticks), x0 + w, py(double(i) / yticks), kGrey);
    c.line(x0, y0 + h, x0 + w, y0 + h, kBlack);
    c.line(x0, y0, x0, y0 + h, kBlack);
  }
};

// Black -> blue -> red -> yellow for v in [0, 1].
Rgb ramp(double v) {
  v = std::clamp(v, 0.0, 1.0);
  const std::array<std::array<double, 3>, 4> stops = {
      {{0, 0, 0}, {30, 60, 200}, {220, 40, 40}, {255, 230, 60}}};
  const double f = v * 3.0;
  const int i = std::min(2, static_cast<int>(f));
  const double t = f - i;
  Rgb c{};
  for (int k = 0; k < 3; ++k)
    c[k] = static_cast<uint8_t>(std::lround(stops[i][k] + t * (stops[i + 1][k] - stops[i][k])));
  return c;
}

// A distinct colour per expert index (hues spaced by the golden ratio).
Rgb expert_colour(int64_t e) {
  const double hue = std::fmod(static_cast<double>(e) * 0.6180339887498949, 1.0) * 6.0;
  const int i = static_cast<int>(hue);
  const double f = hue - i, v = 230, s = 0.75;
  const double p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  const double rgb[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  return {static_cast<uint8_t>(rgb[i % 6][0]), static_cast<uint8_t>(rgb[i % 6][1]),
          static_cast<uint8_t>(rgb[i % 6][2])};
}

std::filesystem::path effective_plot(const std::filesystem::path& dir, const RouteAnalysis& a) {
  const int64_t L = a.shape.moe_layers(), H = a.shape.heads;
  Canvas c(700, 420, kWhite);
  Area area;
  area.frame(c, static_cast<int>(std::max<int64_t>(1, L - 1)), 4);
  const double ymax = static_cast<double>(a.shape.experts);
  for (int k = 0; k < 4; ++k) {
    std::vector<double> y(L, 0.0);
    for (int64_t l = 0; l < L; ++l)
      for (double v : a.effective[k][l]) y[l] += v / static_cast<double>(H);
    for (int64_t l = 0; l < L; ++l) {
      const double fx = L > 1 ? double(l) / double(L - 1) : 0.5;
      const int64_t x = area.px(fx), py = area.py(y[l] / ymax);
      c.rect(x - 2, py - 2, 5, 5, kSeries[k]);
      if (l > 0) {
        const double fx0 = double(l - 1) / double(L - 1);
        c.line(area.px(fx0), area.py(y[l - 1] / ymax), x, py, kSeries[k]);
      }
    }
  }
  std::string layers;
  for (int64_t l : a.shape.layers) layers += fmt::format("{}{}", layers.empty() ? "" : ",", l);
  const auto path = dir / "effective_experts.png";
  c.write(path,
          {{"Title", "effective experts per head, exp(entropy), mean over heads, by MoE layer"},
           {"X axis", fmt::format("MoE layers {} (block indices), evenly spaced", layers)},
           {"Y axis", fmt::format("0 to {} experts, grid every quarter", a.shape.experts)},
           {"Series", fmt::format("{}; {}; {}; {}", kSeriesNames[0], kSeriesNames[1],
                                  kSeriesNames[2], kSeriesNames[3])}});
  return path;
}

std::filesystem::path gap_plot(const std::filesystem::path& dir, const RouteStats& s) {
  // The CDF at each edge: the share of gaps below it.
  std::vector<int64_t> bins(kGapBins, 0);
  const int64_t* g = s.gap_hist.data<int64_t>();
  int64_t total = 0;
  for (int64_t i = 0; i < s.gap_hist.numel(); ++i) bins[i % kGapBins] += g[i], total += g[i];
  Canvas c(700, 420, kWhite);
  Area area;
  area.frame(c, 6, 4);
  int64_t below = 0;
  int64_t px = -1, py = -1;
  for (int i = 0; i < kGapEdges; ++i) {
    below += bins[i];
    const double f = total ? double(below) / double(total) : 0.0;
    const int64_t x = area.px(double(i) / double(kGapEdges - 1)), y = area.py(f);
    if (px >= 0) {
      c.line(px, py, x, py, kSeries[0]);  // a step: flat to the next edge, then up
      c.line(x, py, x, y, kSeries[0]);
    }
    px = x, py = y;
  }
  const auto path = dir / "gap_cdf.png";
  c.write(path,
          {{"Title", "CDF of the gap between the K-th and the (K+1)-th biased router score"},
           {"X axis", "gap from 1e-6 (left) to 1 (right), log scale, grid every decade"},
           {"Y axis",
            "share of (token, head) choices with a smaller gap, 0 to 1, grid every quarter"}});
  return path;
}

std::filesystem::path utilisation_plot(const std::filesystem::path& dir, const RouteStats& s,
                                       int64_t l) {
  const int64_t H = s.shape.heads, E = s.shape.experts;
  std::vector<double> share(static_cast<size_t>(H * E), 0.0);
  const int64_t* n = s.counts.data<int64_t>();
  double mx = 0;
  for (int64_t h = 0; h < H; ++h) {
    std::vector<int64_t> v(E, 0);
    for (int m = 0; m < kModalities; ++m)
      for (int p = 0; p < kPasses; ++p)
        for (int b = 0; b < kStepBins; ++b)
          for (int64_t e = 0; e < E; ++e) v[e] += n[s.count_index(l, h, m, p, b, e)];
    int64_t t = 0;
    for (int64_t x : v) t += x;
    for (int64_t e = 0; e < E; ++e) {
      share[h * E + e] = t ? double(v[e]) / double(t) : 0.0;
      mx = std::max(mx, share[h * E + e]);
    }
  }
  const int64_t cw = std::clamp<int64_t>(768 / E, 2, 24), ch = std::clamp<int64_t>(384 / H, 4, 32);
  Canvas c(E * cw, H * ch, kWhite);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t e = 0; e < E; ++e)
      c.rect(e * cw, h * ch, cw, ch, ramp(mx > 0 ? share[h * E + e] / mx : 0.0));
  const auto path = dir / fmt::format("utilisation_{}.png", s.shape.layers[l]);
  c.write(path,
          {{"Title", fmt::format("utilisation of MoE layer {} (block index)", s.shape.layers[l])},
           {"Layout", fmt::format("rows: heads 0 to {} (top to bottom); columns: experts 0 to {}",
                                  H - 1, E - 1)},
           {"Colour", fmt::format("share of the head's selections: black 0, blue, red, yellow "
                                  "{:.4f} (the layer's largest)",
                                  mx)}});
  return path;
}

// The first choice of each conditional video row, one panel per latent frame, left to right.
std::optional<std::filesystem::path> map_plot(const std::filesystem::path& dir, const RouteStats& s,
                                              const RouteMap& m, size_t file) {
  const auto [T, Hg, Wg] = s.video_grid;
  const int32_t* cls = s.row_class.data<int32_t>();
  const int32_t* ex = m.experts.data<int32_t>();
  const int64_t K = m.experts.size(1);
  std::vector<int32_t> first;
  for (int64_t r = 0; r < m.experts.size(0); ++r)
    if (cls[r] == 0) first.push_back(ex[r * K]);  // class 0: video, conditional pass
  if (T <= 0 || Hg <= 0 || Wg <= 0 || static_cast<int64_t>(first.size()) != T * Hg * Wg)
    return std::nullopt;
  const int64_t cell = std::clamp<int64_t>(256 / std::max(Hg, Wg), 2, 32), gap = 4;
  Canvas c(T * Wg * cell + (T - 1) * gap, Hg * cell, kWhite);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t y = 0; y < Hg; ++y)
      for (int64_t x = 0; x < Wg; ++x)
        c.rect(t * (Wg * cell + gap) + x * cell, y * cell, cell, cell,
               expert_colour(first[static_cast<size_t>((t * Hg + y) * Wg + x)]));
  const auto path = dir / fmt::format("route_map_{}_{}_{}_{}.png", file, m.layer, m.head, m.step);
  c.write(path, {{"Title", fmt::format("first choice of each video token, block {} head {} step {} "
                                       "(conditional pass)",
                                       m.layer, m.head, m.step)},
                 {"Layout",
                  fmt::format("{} latent frames left to right, each {} x {} tokens", T, Hg, Wg)},
                 {"Colour", "one hue per expert index (golden-ratio spacing)"}});
  return path;
}

// The first choices of a route map blended half and half over the decoded frames: latent frame t
// over decoded frame t (F - 1) / (T - 1), each pixel coloured by the token covering it.
std::optional<std::filesystem::path> frames_plot(const std::filesystem::path& dir,
                                                 const RouteStats& s, const RouteMap& m,
                                                 const Tensor& frames) {
  const auto [T, Hg, Wg] = s.video_grid;
  const int64_t F = frames.size(0), H = frames.size(2), W = frames.size(3);
  const int32_t* cls = s.row_class.data<int32_t>();
  const int32_t* ex = m.experts.data<int32_t>();
  const int64_t K = m.experts.size(1);
  std::vector<int32_t> first;
  for (int64_t r = 0; r < m.experts.size(0); ++r)
    if (cls[r] == 0) first.push_back(ex[r * K]);
  if (T <= 0 || Hg <= 0 || Wg <= 0 || static_cast<int64_t>(first.size()) != T * Hg * Wg)
    return std::nullopt;
  const int64_t gap = 4;
  Canvas c(T * W + (T - 1) * gap, H, kWhite);
  const Tensor f32 = frames.to_f32();
  for (int64_t t = 0; t < T; ++t) {
    const int64_t f = T > 1 ? std::min(F - 1, t * (F - 1) / (T - 1)) : 0;
    const std::vector<uint8_t> rgb = media::frame_to_rgb8(f32.f32() + f * 3 * H * W, H, W);
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        const Rgb e =
            expert_colour(first[static_cast<size_t>((t * Hg + y * Hg / H) * Wg + x * Wg / W)]);
        Rgb p{};
        for (int k = 0; k < 3; ++k)
          p[k] =
              static_cast<uint8_t>((rgb[static_cast<size_t>((y * W + x) * 3 + k)] + e[k] + 1) / 2);
        c.set(t * (W + gap) + x, y, p);
      }
  }
  const auto path = dir / fmt::format("route_frames_0_{}_{}_{}.png", m.layer, m.head, m.step);
  c.write(path,
          {{"Title", fmt::format("first choice of each video token over the decoded frames, "
                                 "block {} head {} step {} (conditional pass)",
                                 m.layer, m.head, m.step)},
           {"Layout", fmt::format("latent frames 0 to {} left to right, each over decoded frame "
                                  "t x {} / {} of {}",
                                  T - 1, F - 1, std::max<int64_t>(T - 1, 1), F)},
           {"Colour", "half the frame, half one hue per expert index"}});
  return path;
}

}  // namespace

std::vector<std::filesystem::path> write_route_plots(const std::filesystem::path& dir,
                                                     const RouteAnalysis& a,
                                                     const RouteStats& merged,
                                                     const std::vector<RouteStats>& files,
                                                     const Tensor& frames) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  AVDIT_REQUIRE(!ec && std::filesystem::is_directory(dir),
                "--plots {}: cannot make the folder ({})", dir.string(),
                ec ? ec.message() : "not a folder");
  std::vector<std::filesystem::path> out;
  out.push_back(effective_plot(dir, a));
  out.push_back(gap_plot(dir, merged));
  for (int64_t l = 0; l < merged.shape.moe_layers(); ++l)
    out.push_back(utilisation_plot(dir, merged, l));
  for (size_t f = 0; f < files.size(); ++f)
    for (const RouteMap& m : files[f].maps)
      if (auto p = map_plot(dir, files[f], m, f)) out.push_back(*p);
  if (frames.defined() && !files.empty())
    for (const RouteMap& m : files[0].maps)
      if (auto p = frames_plot(dir, files[0], m, frames)) out.push_back(*p);
  return out;
}

#else

bool route_plots_available() { return false; }

std::vector<std::filesystem::path> write_route_plots(const std::filesystem::path&,
                                                     const RouteAnalysis&, const RouteStats&,
                                                     const std::vector<RouteStats>&,
                                                     const Tensor&) {
  throw RuntimeFailure("--plots: this build has no PNG writer (libpng / the media writers)");
}

#endif

}  // namespace avdit::analysis::routes
