// The on-disk cache of MiniMax-H3's adaLN table (H3TableOptions): the table depends only on the
// DiT's weights, the schedule's timestep sets and the precision, so a warm run reads it (about 1 GB
// at full width and 49 steps) instead of the 13B-parameter projections (26 GB). Entries are
// safetensors named by the SHA-256 of what determines them; a damaged entry or an unwritable folder
// costs the computation (with a warning), never the run.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/h3/model.h"

namespace avdit::ops {
class Context;
}

namespace avdit::pipeline {

std::string adaln_table_key(const std::filesystem::path& dit_dir,
                            const std::vector<std::vector<float>>& sets, DType act, bool cuda);
// The same for weights identified otherwise (random weights: random_weights.h random_identity).
std::string adaln_table_key(const std::string& weights_identity,
                            const std::vector<std::vector<float>>& sets, DType act, bool cuda);

// DIR/adaln/KEY.safetensors placed on ctx, one H3Tables per set; nullopt on a miss.
std::optional<std::vector<models::h3::H3Tables>> load_adaln_table(
    ops::Context& ctx, const models::h3::H3Config& config, const std::filesystem::path& dir,
    const std::string& key, const std::vector<std::vector<float>>& sets);

// Writes the model's table there atomically; a failure is a warning.
void store_adaln_table(ops::Context& ctx, const std::filesystem::path& dir, const std::string& key,
                       const models::h3::H3Model& model);

}  // namespace avdit::pipeline
