// Every checkpoint tensor of a MAGI-2 preview model (official names, shapes, dtypes), derived from
// the config alone: used to validate a checkpoint at load, to write random checkpoints (`avdit
// init`) and to count parameters without weights (`avdit inspect`).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/magi2/config.h"
#include "models/tensor_spec.h"

namespace avdit::models::magi2 {

// In state_dict order of the reference's Transformer (pre_adapter, post_adapter,
// block.layers.i...).
std::vector<TensorSpec> magi2_tensor_specs(const Magi2Config& config);

struct Magi2ParamCounts {
  int64_t total = 0;           // every value the checkpoint stores
  int64_t routed_experts = 0;  // moe_mlp.W_gate / W_up / W_down of every MoE layer
  int64_t active_per_token =
      0;  // what one video token touches: its modality's blocks, top_k of E routed experts
};

Magi2ParamCounts magi2_param_counts(const Magi2Config& config);

// Short human-readable family report for `avdit inspect` (key -> value).
std::vector<std::pair<std::string, std::string>> magi2_config_report(const Magi2Config& config);

// "114.0B", "3.29M", ... (for reports).
std::string format_param_count(int64_t n);

}  // namespace avdit::models::magi2
