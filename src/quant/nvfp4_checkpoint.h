// NVFP4-packed routed experts in a checkpoint: the tensor names, reading them back (checked), and
// `avdit quantize --nvfp4 experts`, which rewrites a MAGI-2 checkpoint with its routed experts packed.
//
// A routed-expert tensor NAME (block.layers.{i}.mlp.moe_mlp.W_gate / W_up / W_down, stored [in, out] as
// [G = H_moe * E, K, N]) is replaced by three tensors (layout of quant/nvfp4.h, K-major, i.e. each
// expert matrix transposed to [N, K] with the blocks of 16 running along the reduction dim K):
//   NAME.nvfp4_values       U8      [G, N, K/2]   byte (g, n, j) = code(k = 2j) | code(k = 2j+1) << 4
//   NAME.nvfp4_block_scale  F8_E4M3 [G, N, K/16]  e4m3 scale of k in [16b, 16b + 16) of column n
//   NAME.nvfp4_global_scale F32     [G]           the encode scale S of expert g (decode divides by it)
// Every other tensor is copied unchanged (shared and modality experts, attention, router, norms).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"
#include "quant/nvfp4.h"

namespace avdit::quant {

inline constexpr std::string_view kNvfp4ValuesSuffix = ".nvfp4_values";
inline constexpr std::string_view kNvfp4BlockScaleSuffix = ".nvfp4_block_scale";
inline constexpr std::string_view kNvfp4GlobalScaleSuffix = ".nvfp4_global_scale";

// True for the routed-expert stacks a MAGI-2 MoE layer holds (moe_mlp.W_gate / W_up / W_down).
bool is_routed_expert_tensor(std::string_view name);

// The three packed tensors that stand for `name` of shape [G, K, N] (values, block scales, global).
std::vector<TensorDecl> nvfp4_packed_decls(const std::string& name, const Shape& shape);

// Whether the checkpoint holds `name` in packed form (its .nvfp4_values tensor is present).
bool has_nvfp4_packed(const Checkpoint& ckpt, const std::string& name);

// Experts [g0, g1) of the packed `name` whose unpacked shape is `shape` = [G, K, N]: zero-copy views of
// the mapping. BadInput naming the file and tensor when a part is missing or has the wrong dtype or shape.
Nvfp4Matrix read_nvfp4_packed(const Checkpoint& ckpt, const std::string& name, const Shape& shape, int64_t g0,
                              int64_t g1);

struct QuantizeSummary {
  int64_t packed_tensors = 0;   // routed-expert stacks replaced
  int64_t copied_tensors = 0;   // everything else
  int64_t bytes_in = 0, bytes_out = 0;
  int64_t routed_bytes_in = 0, routed_bytes_out = 0;
  int shards = 0;
};

// The rewrite behind `avdit quantize --nvfp4 experts IN OUT` (models/magi2/quantize.h checks that IN is a
// MAGI-2 checkpoint first). IN: a checkpoint (file, index or folder, with its config.json) holding
// routed-expert tensors; OUT: a new folder (BadInput if it exists) with config.json and the rewritten
// weights, sharded with an index when large. Atomic: written under a temporary name beside OUT and
// renamed at the end, so OUT never holds half a checkpoint. progress: draw a progress bar on stderr.
QuantizeSummary quantize_checkpoint_nvfp4_experts(const std::filesystem::path& in, const std::filesystem::path& out,
                                                  bool progress = true,
                                                  int64_t max_shard_bytes = int64_t{4} << 30);

}  // namespace avdit::quant
