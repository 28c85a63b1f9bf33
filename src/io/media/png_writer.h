// PNG output through libpng: one frame, every frame of a clip into a folder, and the encoder the
// contact sheet shares. 8-bit RGB, pixels exactly as rgb8.h maps them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace avdit::media {

// Text chunks (keyword, value) stored in the file; values are UTF-8 (iTXt).
using PngText = std::vector<std::pair<std::string, std::string>>;

// Encodes interleaved 8-bit RGB rows (width * 3 bytes each, tightly packed) as a PNG in memory.
std::vector<uint8_t> encode_png(const uint8_t* rgb, int64_t width, int64_t height,
                                const PngText& text = {});

// frame: [3, H, W] float32 in [-1, 1].
void write_png(const std::filesystem::path& path, const Tensor& frame);

// frames: [T, 3, H, W]; writes dir/frame_00000.png ... in one go (the folder appears complete or
// not at all; it must not exist yet or be empty).
void write_png_frames(const std::filesystem::path& dir, const Tensor& frames);

}  // namespace avdit::media
