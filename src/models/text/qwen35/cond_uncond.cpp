// MAGI-2's cond / uncond text states (see cond_uncond.h), on the host: a few hundred rows.
#include "models/text/qwen35/cond_uncond.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "models/text/text_encoder.h"

namespace avdit::models::text {
namespace {

// rows F32 [T, H] -> F32 [L, H]: bf16-rounded values, then L - T zero rows.
Tensor round_and_pad(const Tensor& rows, int64_t T, int64_t H, int64_t L) {
  Tensor out = Tensor::zeros({L, H}, DType::F32);
  if (T > 0) {
    const Tensor r = rows.to(DType::BF16).to_f32();
    std::memcpy(out.f32(), r.f32(), static_cast<size_t>(T * H) * sizeof(float));
  }
  return out;
}

}  // namespace

CondUncond pad_cond_uncond(const Tensor& cond, const Tensor& uncond) {
  AVDIT_REQUIRE(cond.defined() && cond.ndim() == 2 && cond.size(0) >= 1,
                "MAGI-2 text states: the prompt's state must be [T >= 1, hidden], found {}",
                cond.defined() ? cond.shape_str() : "nothing");
  const int64_t H = cond.size(1);
  const int64_t Tu = uncond.defined() ? uncond.size(0) : 0;
  AVDIT_REQUIRE(!uncond.defined() || (uncond.ndim() == 2 && uncond.size(1) == H),
                "MAGI-2 text states: the negative prompt's state {} does not match the prompt's {}",
                uncond.shape_str(), cond.shape_str());
  CondUncond r;
  r.cond_len = cond.size(0);
  r.uncond_len = Tu;
  const int64_t L = std::max(r.cond_len, r.uncond_len);
  r.cond = round_and_pad(cond.to_f32(), r.cond_len, H, L);
  r.uncond = round_and_pad(uncond.defined() ? uncond.to_f32() : Tensor(), Tu, H, L);
  return r;
}

CondUncond encode_cond_uncond(const TextEncoder& encoder, const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>* negative) {
  const Tensor cond = encoder.encode(prompt);
  const Tensor uncond = negative ? encoder.encode(*negative) : Tensor();
  return pad_cond_uncond(cond, uncond);
}

}  // namespace avdit::models::text
