// Image files as data URLs for the image-to-video enhancement task.
#include "pipeline/enhance/image_url.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/sha256.h"

namespace avdit::pipeline::enhance {

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k)
      v = (v << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 0x3f] : '=';
  }
  return out;
}

ImageUrl image_data_url(const std::filesystem::path& file) {
  std::ifstream f(file, std::ios::binary);
  AVDIT_REQUIRE(f.good(),
                "cannot read the image {}: give the first frame as a PNG, JPEG or WebP file",
                file.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  AVDIT_REQUIRE(!bytes.empty(), "the image {} is empty", file.string());
  std::string suffix = file.extension().string();
  std::transform(suffix.begin(), suffix.end(), suffix.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const char* mime = suffix == ".png"    ? "image/png"
                     : suffix == ".webp" ? "image/webp"
                                         : "image/jpeg";
  return {fmt::format("data:{};base64,{}", mime, base64(bytes)),
          sha256_hex(std::string_view(bytes))};
}

}  // namespace avdit::pipeline::enhance
