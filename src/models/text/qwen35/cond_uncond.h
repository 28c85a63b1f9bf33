// What MAGI-2's pipeline does with the encoder's states before the DiT sees them: each state is
// cast to bf16 (the engine's weight dtype) and back to float32, the unconditional state is the
// negative prompt's (or empty without one), and both are zero-padded on the right to one length
// while their true lengths travel beside them (the sampler's _pad_or_trim).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace avdit::models::text {

class TextEncoder;

struct CondUncond {
  Tensor cond, uncond;  // F32 [L, hidden] each, L = max(cond_len, uncond_len), zero rows after
  int64_t cond_len = 0, uncond_len = 0;
};

// cond F32 [Tc, hidden] (Tc >= 1); uncond F32 [Tu, hidden] or undefined (no negative prompt:
// Tu = 0). The values are rounded to bf16 (kept as F32) before padding.
CondUncond pad_cond_uncond(const Tensor& cond, const Tensor& uncond);

// The encoder run on the prompt and, when given, on the negative prompt's ids, then
// pad_cond_uncond.
CondUncond encode_cond_uncond(const TextEncoder& encoder, const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>* negative);

}  // namespace avdit::models::text
