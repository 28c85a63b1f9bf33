// Random refiner checkpoints (`avdit init --pipeline magi2` writes a tiny one beside the tiny
// preview, so the two-stage pipeline runs without downloads): the official tensor names and dtypes
// of refiner_tensor_specs, values by the preview family's per-role rule (models/magi2/init.h).
#pragma once

#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace avdit::models::magi2::refiner {

// `config`: a merged refiner config (no "extends"); written as out_dir/config.json beside the
// weights. BadInput when it does not parse as a refiner config.
void init_refiner_checkpoint(const nlohmann::json& config, const std::filesystem::path& out_dir,
                             uint64_t seed);

}  // namespace avdit::models::magi2::refiner
