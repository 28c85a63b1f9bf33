// The fp16 recipe: how a model trained in bf16 runs in fp16 (GPUs without bf16) with every fix
// exact, each switchable so that what it rescues can be measured alone (MiniMax-H3; see the
// README's "fp16" section).
//   residual   the residual stream, and the outputs of the linears that feed it, in fp32
//   rowscale   GEMM input rows past fp16's range scaled by a power of two (ops/linear_f16.h)
//   gating     the SwiGLU product in fp32 (its GEMMs stay fp16)
//   reduction  no split-K partial sums in fp16 (ops/linear_f16.h)
//   gate       a zero adaLN gate adds nothing, even to an overflowed branch (0 x inf is NaN)
#pragma once

#include <string>

namespace avdit::models {

struct Fp16Fixes {
  bool residual = true, rowscale = true, gating = true, reduction = true, gate = true;
  static Fp16Fixes none() { return {false, false, false, false, false}; }
  bool operator==(const Fp16Fixes&) const = default;
};

inline constexpr const char* kFp16FixNames = "residual, rowscale, gating, reduction, gate";

// "all" (the recipe), "none" (the naive cast), or a comma-separated subset of the names above;
// BadInput naming the unknown word otherwise.
Fp16Fixes parse_fp16_fixes(const std::string& list);
// The inverse: "all", "none", or the enabled names joined by commas.
std::string fp16_fixes_str(const Fp16Fixes& f);

}  // namespace avdit::models
