// What NVFP4 routed experts save: routed-expert bytes of a MAGI-2 config in bf16 against the packed
// NVFP4 layout of nvfp4.h, from the config alone (for `avdit inspect --nvfp4-experts`).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/magi2/config.h"

namespace avdit::quant {

struct Nvfp4MemoryCounts {
  int64_t routed_params = 0;   // elements of every moe_mlp.W_gate / W_up / W_down
  int64_t matrices = 0;        // expert matrices [K, N] (one fp32 global scale each)
  int64_t bf16_bytes = 0;      // 2 bytes per weight
  int64_t nvfp4_bytes = 0;     // K N / 2 values + K N / 16 e4m3 scales + 4 per matrix
  int64_t unpackable = 0;      // params left in bf16 (K not a multiple of 16), counted in nvfp4_bytes at 2 bytes
};

Nvfp4MemoryCounts nvfp4_memory_counts(const models::magi2::Magi2Config& config);

// Key -> value lines: params, bf16 and NVFP4 bytes (GB and GiB), bits per weight, the saving.
std::vector<std::pair<std::string, std::string>> nvfp4_memory_report(const models::magi2::Magi2Config& config);

}  // namespace avdit::quant
