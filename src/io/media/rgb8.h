// The decoders' float frames as 8-bit RGB: the one mapping every writer (PNG, mp4, contact sheet)
// uses, so that the same tensor gives the same pixels in every file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace avdit::media {

// [-1, 1] -> [0, 255] in float32 as diffusers' VaeImageProcessor.postprocess and numpy do it:
// x / 2 + 0.5, clamp to [0, 1], * 255, round half to even (nearbyint in the default rounding mode).
inline uint8_t to_u8(float x) {
  const float v = std::clamp(x / 2.0f + 0.5f, 0.0f, 1.0f) * 255.0f;
  return static_cast<uint8_t>(std::nearbyint(v));
}

// Converts one channel-first frame chw: [3, h, w] into interleaved RGB rows of out_w x out_h
// pixels (row stride `stride` bytes) with out_h >= h and out_w >= w; the extra columns and rows
// repeat the last column and row (edge replication).
void frame_to_rgb8(const float* chw, int64_t h, int64_t w, int64_t out_h, int64_t out_w,
                   uint8_t* rgb, ptrdiff_t stride);

// The same, into a new tightly packed buffer of h x w pixels.
std::vector<uint8_t> frame_to_rgb8(const float* chw, int64_t h, int64_t w);

// The index of the frame at `percent` % of a clip of `count` frames: floor(count * percent / 100),
// at most count - 1 (the contact sheet's 10 / 50 / 90 % columns).
int64_t frame_at_percent(int64_t count, int percent);

}  // namespace avdit::media
