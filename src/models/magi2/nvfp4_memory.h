// What NVFP4 routed experts save: routed-expert bytes of a MAGI-2 config in bf16 against the packed
// NVFP4 layout of quant/nvfp4.h, from the config alone (for `avdit inspect --nvfp4-experts`).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/magi2/config.h"

namespace avdit::models::magi2 {

struct Nvfp4MemoryCounts {
  int64_t routed_params = 0;  // elements of every moe_mlp.W_gate / W_up / W_down
  int64_t matrices = 0;       // expert matrices [K, N] (one fp32 global scale each)
  int64_t bf16_bytes = 0;     // 2 bytes per weight
  int64_t nvfp4_bytes = 0;    // K N / 2 values + K N / 16 e4m3 scales + 4 per matrix
  int64_t unpackable =
      0;  // params left in bf16 (K not a multiple of 16), counted in nvfp4_bytes at 2 bytes
};

Nvfp4MemoryCounts nvfp4_memory_counts(const Magi2Config& config);

// Key -> value lines: params, bf16 and NVFP4 bytes (GB and GiB), bits per weight, the saving.
std::vector<std::pair<std::string, std::string>> nvfp4_memory_report(const Magi2Config& config);

// What a single-GPU MAGI-2 preview run keeps resident with NVFP4 routed experts: the weights
// (routed experts packed, every other tensor at its checkpoint dtype, bf16 / fp32) plus the
// activation peak of one layer's forward at `tokens` tokens (one CFG branch: cond and uncond run
// one after the other). The peak is an estimate from the shapes, bf16 activations, for the worst
// layer (a MoE layer), with the routed experts run as unfused grouped GEMMs (gate/up output and the
// swiglu7 output both materialised); each part is listed with its formula (see nvfp4_memory.cpp) so
// the estimate can be checked.
struct ActivationPart {
  std::string name, formula;
  int64_t bytes = 0;
};
struct Nvfp4ResidentEstimate {
  int64_t tokens = 0;
  int64_t routed_nvfp4_bytes = 0;  // the packed routed experts
  int64_t other_weight_bytes = 0;  // every other tensor of the checkpoint at its dtype
  int64_t weight_bytes = 0;
  std::vector<ActivationPart> activation_parts;
  int64_t activation_bytes = 0;  // the peak of one MoE layer's forward
  int64_t total_bytes = 0;       // weights + activations
};

inline constexpr int64_t kPreviewTokens = 58000;  // ~58k tokens: 896x512, 10 s (bench/TARGETS)

Nvfp4ResidentEstimate nvfp4_resident_estimate(const Magi2Config& config,
                                              int64_t tokens = kPreviewTokens);
std::vector<std::pair<std::string, std::string>> nvfp4_resident_report(
    const Magi2Config& config, int64_t tokens = kPreviewTokens);

}  // namespace avdit::models::magi2
