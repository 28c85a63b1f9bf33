// The one place that maps a VAE folder to its decoder family, by the folder's config files.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "models/vae/decoder.h"

namespace avdit::ops {
class Context;
}

namespace avdit::models::vae {

enum class Family { Wan22, TurboVaed, Oobleck, H3Video, H3Audio };
const char* family_name(Family f);

// The family of a VAE folder (release files or a golden fixture's config.json); BadInput naming
// the folder when none matches.
Family detect_family(const std::filesystem::path& dir);

// The decoder of a VAE folder on ctx. act: the video decoders' precision, F32 or BF16 (the audio
// decoders run in F32 only: BadInput for BF16, as for an unknown folder).
std::unique_ptr<Decoder> open_decoder(ops::Context& ctx, const std::filesystem::path& dir,
                                      DType act = DType::F32);

// Whether the family's decoder has a BF16 mode (the three video decoders).
bool has_bf16(Family f);

}  // namespace avdit::models::vae
