// Every tensor of an official MiniMax-H3 transformer checkpoint (name, shape, dtype) for a
// config: the one list that loading validates against, `avdit init` writes and `inspect` counts.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/h3/config.h"
#include "models/tensor_spec.h"

namespace avdit::models::h3 {

// In checkpoint order of the official index: global tensors, token_refiner.blocks.r.*,
// blocks.i.*, final_layer.*. dtypes as shipped: F32 for the fp32 islands (patch projections,
// time_embedder, output heads, rope.inv_freq; in the curve variant also adaln_t_table and every
// adaln_proj.linear), BF16 for the rest. `curve_variant` defaults to config.curve_variant().
std::vector<TensorSpec> h3_tensor_specs(const H3Config& config, bool curve_variant = false);

// (label, value) lines for `avdit inspect`: sizes, total parameters and bytes, the adaLN
// projection share (~13.0B of ~33.1B for the official config).
std::vector<std::pair<std::string, std::string>> h3_config_report(const H3Config& config);

// Parameter counts used by the report and its test.
struct H3ParamCounts {
  int64_t total = 0;
  int64_t adaln_proj = 0;  // blocks.*.adaln_proj + final_layer.adaln_proj
  int64_t bytes = 0;       // checkpoint bytes with the official dtypes
};
H3ParamCounts h3_param_counts(const H3Config& config, bool curve_variant = false);

}  // namespace avdit::models::h3
