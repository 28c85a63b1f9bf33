// The line plots of `avdit score` (see plot.h).
#include "score/plot.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include "core/error.h"
#include "io/output_file.h"
#if AVDIT_HAVE_MEDIA
#include "io/media/png_writer.h"
#endif

namespace avdit::score {

namespace {

// 5x7 glyphs, one byte per row (bit 4 the leftmost column): digits, lower-case letters (upper case
// is drawn as lower case) and the punctuation of labels and numbers.
struct Glyph {
  char c;
  std::array<uint8_t, 7> rows;
};
constexpr Glyph kFont[] = {
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}},
    {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}},
    {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}},
    {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}},
    {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}},
    {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'a', {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F}},
    {'b', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E}},
    {'c', {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E}},
    {'d', {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F}},
    {'e', {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E}},
    {'f', {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}},
    {'g', {0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E}},
    {'h', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}},
    {'i', {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E}},
    {'j', {0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C}},
    {'k', {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}},
    {'l', {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'m', {0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11}},
    {'n', {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11}},
    {'o', {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E}},
    {'p', {0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10}},
    {'q', {0x00, 0x00, 0x0D, 0x13, 0x0F, 0x01, 0x01}},
    {'r', {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10}},
    {'s', {0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E}},
    {'t', {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}},
    {'u', {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D}},
    {'v', {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04}},
    {'w', {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A}},
    {'x', {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11}},
    {'y', {0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E}},
    {'z', {0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F}},
    {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}},
    {'-', {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}},
    {'+', {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}},
    {':', {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}},
    {'/', {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00}},
    {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
    {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}},
    {'=', {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00}},
    {'_', {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F}},
    {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}},
    {',', {0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08}},
};

const Glyph* glyph(char c) {
  const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const Glyph& g : kFont)
    if (g.c == l) return &g;
  return nullptr;  // drawn as a space
}

constexpr int kScale = 2;  // font pixels per glyph pixel
constexpr int kCharW = 6 * kScale, kCharH = 8 * kScale;
constexpr std::array<std::array<uint8_t, 3>, 8> kPalette = {{{31, 119, 180},
                                                             {214, 39, 40},
                                                             {44, 160, 44},
                                                             {255, 127, 14},
                                                             {148, 103, 189},
                                                             {140, 86, 75},
                                                             {227, 119, 194},
                                                             {23, 190, 207}}};
constexpr std::array<uint8_t, 3> kBlack = {0, 0, 0}, kGrid = {225, 225, 225}, kAxis = {90, 90, 90};

class Canvas {
 public:
  Canvas(int64_t w, int64_t h)
      : r_{w, h, std::vector<uint8_t>(static_cast<size_t>(w * h * 3), 255)} {}
  void px(int64_t x, int64_t y, std::array<uint8_t, 3> c) {
    if (x < 0 || y < 0 || x >= r_.width || y >= r_.height) return;
    uint8_t* p = r_.rgb.data() + (y * r_.width + x) * 3;
    p[0] = c[0], p[1] = c[1], p[2] = c[2];
  }
  void rect(int64_t x0, int64_t y0, int64_t x1, int64_t y1, std::array<uint8_t, 3> c) {
    for (int64_t y = y0; y < y1; ++y)
      for (int64_t x = x0; x < x1; ++x) px(x, y, c);
  }
  // A line of width 2 (Bresenham, each point doubled down and right).
  void line(int64_t x0, int64_t y0, int64_t x1, int64_t y1, std::array<uint8_t, 3> c) {
    const int64_t dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1,
                  sy = y0 < y1 ? 1 : -1;
    int64_t err = dx + dy;
    for (;;) {
      rect(x0, y0, x0 + 2, y0 + 2, c);
      if (x0 == x1 && y0 == y1) break;
      const int64_t e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }
  void text(int64_t x, int64_t y, const std::string& s, std::array<uint8_t, 3> c = kBlack) {
    for (const char ch : s) {
      if (const Glyph* g = glyph(ch))
        for (int row = 0; row < 7; ++row)
          for (int col = 0; col < 5; ++col)
            if (g->rows[row] & (0x10 >> col))
              rect(x + col * kScale, y + row * kScale, x + (col + 1) * kScale,
                   y + (row + 1) * kScale, c);
      x += kCharW;
    }
  }
  Raster take() { return std::move(r_); }

 private:
  Raster r_;
};

std::string tick_label(double v, bool log_y) {
  if (log_y) return fmt::format("1e{}", static_cast<int>(std::lround(v)));
  return std::fabs(v) >= 1000 || (std::fabs(v) < 0.01 && v != 0) ? fmt::format("{:.1e}", v)
                                                                 : fmt::format("{:g}", v);
}

// A "nice" linear tick step (1, 2 or 5 times a power of ten) giving about 5 ticks over span.
double nice_step(double span) {
  const double raw = span / 5, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

void draw_panel(Canvas& cv, const Panel& panel, int64_t top, int64_t width, int64_t height) {
  constexpr int64_t kLeft = 110, kRight = 20, kTop = 40, kBottom = 50;
  const int64_t x0 = kLeft, x1 = width - kRight, y0 = top + kTop, y1 = top + height - kBottom;
  cv.text(kLeft, top + 12, panel.title);
  size_t n = 0;
  double lo = INFINITY, hi = -INFINITY;
  auto value = [&](double v) { return panel.log_y ? std::log10(v) : v; };
  auto drawable = [&](double v) { return std::isfinite(v) && (!panel.log_y || v > 0); };
  for (const Series& s : panel.series) {
    n = std::max(n, s.y.size());
    for (const double v : s.y)
      if (drawable(v)) lo = std::min(lo, value(v)), hi = std::max(hi, value(v));
  }
  if (!(lo <= hi)) lo = 0, hi = 1;
  double step;
  if (panel.log_y) {
    lo = std::floor(lo), hi = std::ceil(hi);
    if (hi == lo) hi = lo + 1;
    step = 1;
  } else {
    if (hi == lo) lo -= 1, hi += 1;
    step = nice_step(hi - lo);
    lo = std::floor(lo / step) * step, hi = std::ceil(hi / step) * step;
  }
  auto ypix = [&](double v) {
    return y1 - static_cast<int64_t>(std::lround((v - lo) / (hi - lo) * double(y1 - y0)));
  };
  auto xpix = [&](size_t i) {  // x_first + i
    return n <= 1
               ? (x0 + x1) / 2
               : x0 +
                     static_cast<int64_t>(std::lround(double(i) / double(n - 1) * double(x1 - x0)));
  };
  for (double v = lo; v <= hi + 1e-9 * step; v += step) {
    const int64_t y = ypix(v);
    cv.rect(x0, y, x1, y + 1, kGrid);
    const std::string l = tick_label(v, panel.log_y);
    cv.text(x0 - 8 - kCharW * static_cast<int64_t>(l.size()), y - kCharH / 2 + 2, l, kAxis);
  }
  const size_t every = std::max<size_t>(1, (n + 9) / 10);
  for (size_t i = 0; i < n; i += every) {
    const int64_t x = xpix(i);
    cv.rect(x, y1, x + 1, y1 + 6, kAxis);
    const std::string l = std::to_string(static_cast<int64_t>(i) + panel.x_first);
    cv.text(x - kCharW * static_cast<int64_t>(l.size()) / 2, y1 + 10, l, kAxis);
  }
  cv.text((x0 + x1) / 2 - kCharW * static_cast<int64_t>(panel.x_label.size()) / 2, y1 + 30,
          panel.x_label, kAxis);
  cv.rect(x0, y0, x0 + 1, y1 + 1, kAxis);
  cv.rect(x0, y1, x1 + 1, y1 + 1, kAxis);
  int64_t legend_y = y0 + 4;
  for (size_t si = 0; si < panel.series.size(); ++si) {
    const Series& s = panel.series[si];
    const auto color = kPalette[si % kPalette.size()];
    int undrawn = 0;
    for (size_t i = 0; i < s.y.size(); ++i) {
      if (!drawable(s.y[i])) {
        ++undrawn;
        continue;
      }
      const int64_t x = xpix(i), y = ypix(value(s.y[i]));
      cv.rect(x - 2, y - 2, x + 3, y + 3, color);
      if (i + 1 < s.y.size() && drawable(s.y[i + 1]))
        cv.line(x, y, xpix(i + 1), ypix(value(s.y[i + 1])), color);
    }
    const std::string label = undrawn ? fmt::format("{} ({} not drawn: {})", s.name, undrawn,
                                                    panel.log_y ? "0 or nan" : "nan or inf")
                                      : s.name;
    const int64_t lx = x1 - 12 - kCharW * (static_cast<int64_t>(label.size()) + 3);
    cv.rect(lx - 4, legend_y - 2, x1 - 6, legend_y + kCharH, {255, 255, 255});
    cv.rect(lx, legend_y + kCharH / 2 - 2, lx + 2 * kCharW, legend_y + kCharH / 2 + 1, color);
    cv.text(lx + 3 * kCharW, legend_y, label);
    legend_y += kCharH + 4;
  }
}

}  // namespace

Raster draw_line_plot(const std::vector<Panel>& panels) {
  constexpr int64_t kWidth = 960, kPanelHeight = 420;
  Canvas cv(kWidth, kPanelHeight * std::max<int64_t>(1, static_cast<int64_t>(panels.size())));
  for (size_t i = 0; i < panels.size(); ++i)
    draw_panel(cv, panels[i], static_cast<int64_t>(i) * kPanelHeight, kWidth, kPanelHeight);
  return cv.take();
}

bool can_write_png() {
#if AVDIT_HAVE_MEDIA
  return true;
#else
  return false;
#endif
}

void write_png_file(const std::string& path, const Raster& r, const std::string& description) {
#if AVDIT_HAVE_MEDIA
  const auto png =
      media::encode_png(r.rgb.data(), r.width, r.height, {{"Description", description}});
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(png.data()), png.size()));
#else
  (void)r;
  (void)description;
  throw RuntimeFailure(fmt::format("{}: this build has no PNG writer (libpng not found)", path));
#endif
}

}  // namespace avdit::score
