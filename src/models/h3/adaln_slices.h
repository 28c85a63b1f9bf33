// The H3 DiT's adaLN modulation weights, slice by slice: which (block, modality, slice) rows of
// blocks.{i}.adaln_proj.linear and final_layer.adaln_proj.linear are exactly zero, for
// `avdit inspect --zero-slices` (a zero slice gives a modulation of 0 at every timestep).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace avdit::models::h3 {

// One slice: `rows` output features of a projection from `row_begin` on. Blocks: feature =
// modality * 6H + slice * H + channel (modality 0 video, 1 text, 2 audio; slices shift_msa,
// scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp). The final layer: shift | scale, no
// modality split (block = -1, modality = -1).
struct AdalnSlice {
  int64_t block = 0, modality = 0, slice = 0;
  int64_t row_begin = 0, rows = 0;
  double max_abs_weight = 0, max_abs_bias = 0;  // NaN entries are not zero and count as nonzero
  bool weight_zero = false, bias_zero = false;  // every entry exactly +-0

  bool zero() const { return weight_zero && bias_zero; }       // 0 at every timestep
  bool constant() const { return weight_zero && !bias_zero; }  // the bias alone, every timestep
  std::string block_name() const;                              // "12" or "final"
  std::string modality_name() const;                           // "video", "text", "audio" or "all"
  std::string slice_name() const;  // "gate_mlp", ...; the final layer's "shift" / "scale"
};

struct AdalnSliceScan {
  std::filesystem::path path;
  int64_t blocks = 0, hidden = 0;
  std::vector<AdalnSlice> slices;  // every slice: blocks in order, then the final layer's two

  int64_t zero_count() const;
  int64_t constant_count() const;
};

// Scans the adaLN projections of the H3 DiT checkpoint at `path` (a transformer folder, a
// .safetensors file or a shard index, with config.json beside it), tensor by tensor in shard
// order through the memory mapping: only the shards holding adaLN projections are mapped, and
// one slice at a time is converted to float32. BadInput (naming the path and what was expected)
// when it is not an H3 DiT checkpoint or a projection is missing or misshapen.
AdalnSliceScan scan_adaln_slices(const std::filesystem::path& path);

// The zero (and weight-zero, bias-nonzero) slices as JSON and as a markdown table with a summary
// line "N zero slices of M".
nlohmann::json adaln_zero_slices_json(const AdalnSliceScan& scan);
std::string adaln_zero_slices_table(const AdalnSliceScan& scan);

}  // namespace avdit::models::h3
