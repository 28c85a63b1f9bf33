// The first frame of an image-to-video prompt as the enhancer sends it: a base64 data URL, with the
// MIME type from the file's suffix as the reference chooses it (.png, .webp, else JPEG).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace avdit::pipeline::enhance {

struct ImageUrl {
  std::string url;     // "data:image/png;base64,..."
  std::string sha256;  // of the file's bytes, for the caption cache's key
};

// BadInput when the file cannot be read or is empty.
ImageUrl image_data_url(const std::filesystem::path& file);

std::string base64(std::string_view bytes);  // RFC 4648, with padding

}  // namespace avdit::pipeline::enhance
