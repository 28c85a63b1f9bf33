// The named points every DiT forward shows around its block stack, the same for every family, so
// that one step cache (sample/step_cache.h) serves them all. The residual stream is the family's
// own (H3: [S, hidden] packed rows; MAGI-2: [L, streams * hidden] in modality-sorted order); a
// probe only ever compares a stream with the same call's or an earlier call's of one layout.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/context.h"

namespace avdit::models {

// The stream entering block 0.
inline constexpr const char* kStackInput = "stack.input";
// Block 0's modulated input (H3: norm1 with the adaLN shift and scale; MAGI-2: the mHC pre-mix of
// layer 0's attention branch, whose stream carries the time embedding): TeaCache's indicator.
inline constexpr const char* kStackModulated = "stack.modulated";
// The stream after block 0 (First-Block-Cache's indicator).
inline constexpr const char* kStackBlock0 = "stack.block0";
// Asked before block `index` runs: a probe may answer the rest of the stack (skip_rest_of_stack).
inline constexpr const char* kStackSkip = "stack.skip";
// Mutable: the stream leaving the last block. After a skip a probe must put its stand-in here.
inline constexpr const char* kStackOutput = "stack.output";

// Whether a probe takes over the stack from block `block` on: it is shown a one-element host flag
// at kStackSkip and sets it to 1. No probe: false, one branch.
inline bool skip_rest_of_stack(ops::Context& ctx, int64_t block) {
  const Point p{kStackSkip, block};
  if (!ops::observed(ctx, p)) return false;
  Tensor flag = Tensor::zeros({1}, DType::U8);
  ops::observe_mut(ctx, p, flag);
  return flag.data<uint8_t>()[0] != 0;
}

}  // namespace avdit::models
