// Decoder folders with random weights, for runs without a checkpoint (`avdit bench vae`, `generate
// --random-weights`): the golden tiny model's tensor names at the tiny model's sizes or at the
// release's (one rule per family, from the goldens' READMEs), seeded values, and the config.json
// the decoder reads for that size. The decoders' loaders check every shape against the config, so
// a wrong rule fails loudly.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>

#include "models/vae/decoder_factory.h"

namespace avdit::models::vae {

enum class DecoderSize { Tiny, Release };
const char* decoder_size_name(DecoderSize s);  // "tiny", "release"

// The golden tiny model of a family: shared/golden/vae-*-tiny (BadInput when missing).
std::filesystem::path golden_decoder(Family f, const std::filesystem::path& shared);

// The config.json of a random folder of that size: the golden's, or the golden's at the release's
// widths and depths.
nlohmann::json random_decoder_config(Family f, DecoderSize size,
                                     const std::filesystem::path& shared);

// The size a decoder folder's configs describe: the golden's config or the release-size one above
// (the same JSON), or a release's own layout, which is the release size (H3: a config.json that
// names its source files; MAGI-2's TurboVAED and Stable Audio folders: no config.json). BadInput
// naming the folder otherwise.
DecoderSize random_decoder_size(Family f, const std::filesystem::path& dir,
                                const std::filesystem::path& shared);

// Writes config.json and model.safetensors (F32) into `dir` unless a complete folder is there (a
// marker written last). Values: normal, std 1/sqrt(fan-in) for matrices and kernels, 1 + 0.02
// noise for 1-D scales, 0.02 noise for biases and the rest; a function of the seed and the rule.
void write_random_decoder(Family f, DecoderSize size, const std::filesystem::path& shared,
                          const std::filesystem::path& dir, uint64_t seed);

// Whether `dir` holds a complete folder of write_random_decoder.
bool random_decoder_complete(const std::filesystem::path& dir);

}  // namespace avdit::models::vae
