// `avdit quantize --nvfp4 experts` for the MAGI-2 preview: the checkpoint checked to be one (its
// config parsed, so a config the model cannot load is refused), then its routed experts
// NVFP4-packed by quant/nvfp4_checkpoint.h.
#pragma once

#include <cstdint>
#include <filesystem>

#include "quant/nvfp4_checkpoint.h"

namespace avdit::models::magi2 {

// BadInput "not a MAGI-2 checkpoint" unless `in` has a MAGI-2 preview config.json; then
// quant::quantize_checkpoint_nvfp4_experts(in, out, progress).
quant::QuantizeSummary quantize_nvfp4_experts(const std::filesystem::path& in,
                                              const std::filesystem::path& out,
                                              bool progress = true);

}  // namespace avdit::models::magi2
