// Float frames to 8-bit RGB (see rgb8.h).
#include "io/media/rgb8.h"

namespace avdit::media {

void frame_to_rgb8(const float* chw, int64_t h, int64_t w, int64_t out_h, int64_t out_w,
                   uint8_t* rgb, ptrdiff_t stride) {
  const int64_t plane = h * w;
  for (int64_t y = 0; y < out_h; ++y) {
    const int64_t sy = std::min(y, h - 1);
    const float* r = chw + sy * w;
    const float* g = r + plane;
    const float* b = g + plane;
    uint8_t* row = rgb + y * stride;
    for (int64_t x = 0; x < out_w; ++x) {
      const int64_t sx = std::min(x, w - 1);
      row[3 * x] = to_u8(r[sx]);
      row[3 * x + 1] = to_u8(g[sx]);
      row[3 * x + 2] = to_u8(b[sx]);
    }
  }
}

std::vector<uint8_t> frame_to_rgb8(const float* chw, int64_t h, int64_t w) {
  std::vector<uint8_t> rgb(static_cast<size_t>(h * w * 3));
  frame_to_rgb8(chw, h, w, h, w, rgb.data(), static_cast<ptrdiff_t>(w * 3));
  return rgb;
}

int64_t frame_at_percent(int64_t count, int percent) {
  return std::min(count - 1, count * percent / 100);
}

}  // namespace avdit::media
