// The te-h3-qwen3vl-tiny golden for the CPU and GPU tests of the Qwen3-VL text encoder: its cases,
// the README's float32 bar and the comparison it states (max |err| / max |ref| per tensor).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/observer.h"
#include "core/tensor.h"
#include "ops/context.h"
#include "testing/golden_compare.h"

namespace avdit::testing {

inline const std::filesystem::path kQwen3VLTiny =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "te-h3-qwen3vl-tiny";
inline constexpr int kQwen3VLCases = 6;
inline constexpr int kQwen3VLTinySelected = 4;  // the README's K for this fixture
// README "Suggested bars": an fp32 implementation within 2e-5 of max |ref| per case.
inline constexpr double kQwen3VLFp32Bar = 2e-5;

// max |got - want| / max |want| (max |got - want| when want is all zeros); the element counts must
// agree.
inline double rel_err(const Tensor& got, const Tensor& want) { return golden_rel_err(got, want); }

// hidden_states[j] of a case: [L + 1, T, H] -> [T, H].
inline Tensor hidden_state(const TensorMap& outputs, int c, int64_t j) {
  return outputs.at("case" + std::to_string(c) + ".hidden_states").select(j);
}

// Every named point of a forward, copied to the host in F32 (the residual is updated in place
// after its point, so each is cloned).
using CaptureProbe = CapturePoints;

}  // namespace avdit::testing
