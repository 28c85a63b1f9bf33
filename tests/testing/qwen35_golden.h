// The te-magi2-qwen35-tiny golden for the CPU and GPU tests of MAGI-2's Qwen3.5 text encoder: its
// folder, cases and the README's bars: float32, max |err| <= 1e-4 max |ref|; a bf16
// implementation, cosine >= 0.98 per case against text_states.
#pragma once

#include <filesystem>

#include "testing/golden_compare.h"

namespace avdit::testing {

inline const std::filesystem::path kQwen35Tiny =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "te-magi2-qwen35-tiny";
inline constexpr int kQwen35Cases = 6;
inline constexpr double kQwen35Fp32Bar = 1e-4;
inline constexpr double kQwen35Bf16Cosine = 0.98;

}  // namespace avdit::testing
