// Exact frame rates (see frame_rate.h).
#include "io/media/frame_rate.h"

#include <charconv>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace avdit::media {

namespace {

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string FrameRate::str() const {
  return den == 1 ? std::to_string(num) : fmt::format("{}/{}", num, den);
}

void check_frame_rate(FrameRate rate) {
  AVDIT_REQUIRE(rate.num > 0 && rate.den > 0 && rate.num <= 1000LL * rate.den &&
                    1000LL * rate.num >= rate.den,
                "frame rate {}/{} is out of range; expected 1/1000 to 1000 fps", rate.num,
                rate.den);
}

FrameRate parse_frame_rate(std::string_view text, std::string_view what) {
  int64_t num = 0, den = 1;
  bool ok = false;
  if (const auto slash = text.find('/'); slash != std::string_view::npos) {
    ok = parse_int(text.substr(0, slash), num) && parse_int(text.substr(slash + 1), den);
  } else if (const auto dot = text.find('.'); dot != std::string_view::npos) {
    int64_t whole = 0, frac = 0;
    const std::string_view f = text.substr(dot + 1);
    ok = parse_int(text.substr(0, dot), whole) && f.size() <= 3 && parse_int(f, frac) &&
         f.find_first_not_of("0123456789") == std::string_view::npos;
    if (ok) {
      for (size_t i = f.size(); i < 3; ++i) frac *= 10;
      num = whole * 1000 + frac;
      den = 1000;
      for (const int64_t ntsc : {24000, 30000, 60000}) {
        if (num == ntsc - ntsc / 1000) {  // 23.976, 29.97, 59.94
          num = ntsc;
          den = 1001;
        }
      }
    }
  } else {
    ok = parse_int(text, num);
  }
  AVDIT_REQUIRE(ok && num > 0 && den > 0 && num <= 1000000000 && den <= 1000000000,
                "{} '{}' is not a frame rate; expected e.g. 24, 25 or 30000/1001", what, text);
  const int64_t g = std::gcd(num, den);
  const FrameRate rate{static_cast<int>(num / g), static_cast<int>(den / g)};
  check_frame_rate(rate);
  return rate;
}

int64_t samples_for_frames(int64_t frames, FrameRate rate, int sample_rate) {
  // frames * den / num seconds; round half up in integers (no float rounding at long clips).
  const __int128 n = static_cast<__int128>(frames) * rate.den * sample_rate;
  return static_cast<int64_t>((2 * n + rate.num) / (2 * static_cast<__int128>(rate.num)));
}

}  // namespace avdit::media
