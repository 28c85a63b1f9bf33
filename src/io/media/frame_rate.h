// A video frame rate as an exact fraction (24, 25, 30000/1001 ...): NTSC-style rates have no
// exact decimal form, and the mp4 time base and the audio length are derived from it exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace avdit::media {

struct FrameRate {
  int num = 24;
  int den = 1;
  double fps() const { return static_cast<double>(num) / den; }
  std::string str() const;  // "24" or "30000/1001"
};

// Parses "24", "30000/1001" or "23.976" (decimals become a fraction over 1000, except 23.976,
// 29.97 and 59.94, which mean the NTSC rates 24000/1001, 30000/1001, 60000/1001). BadInput
// naming `what` when the text is not a rate from 1/1000 to 1000 fps.
FrameRate parse_frame_rate(std::string_view text, std::string_view what = "frame rate");
// BadInput unless num and den are positive and the rate is within 1/1000 .. 1000 fps.
void check_frame_rate(FrameRate rate);

// The number of audio samples at `sample_rate` that lasts as long as `frames` video frames,
// rounded to the nearest sample.
int64_t samples_for_frames(int64_t frames, FrameRate rate, int sample_rate);

}  // namespace avdit::media
