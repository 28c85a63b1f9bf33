// Wan2.2's patch-2 (un)patchify between pixels [3, T, H, W] and channel-last patches
// [T, H/2, W/2, 12] (channel 4c + 2r + q holds pixel row offset q, column offset r of colour c;
// TurboVAED's unpatchify has the same layout). Pure permutations on the host, where the video
// arrives and leaves.
#pragma once

#include "core/tensor.h"

namespace avdit::models::vae::wan22 {

inline constexpr int64_t kPatch = 2;

// [T, h, w, 12] (F32, host) -> [3, T, 2h, 2w].
Tensor unpatchify(const Tensor& patches);
// [3, T, H, W] (F32, host; H, W even) -> [T, H/2, W/2, 12].
Tensor patchify(const Tensor& video);

}  // namespace avdit::models::vae::wan22
