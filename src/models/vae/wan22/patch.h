// Moves of the video VAEs' outputs. Wan2.2's patch-2 (un)patchify between pixels [3, T,
// H, W] and channel-last patches [T, H/2, W/2, 12] (channel 4c + 2r + q holds pixel row offset q,
// column offset r of colour c; TurboVAED's unpatchify has the same layout). Pure permutations: on
// the device up to channel-last frames, then on the host, where the video arrives and leaves.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace avdit::ops {
class Context;
}

namespace avdit::models::vae::wan22 {

inline constexpr int64_t kPatch = 2;

// [T, h, w, 12] (F32, host) -> [3, T, 2h, 2w].
Tensor unpatchify(const Tensor& patches);
// [3, T, H, W] (F32, host; H, W even) -> [T, H/2, W/2, 12].
Tensor patchify(const Tensor& video);

// Patches [T, h, w, 12] -> frames [T, 2h, 2w, 3] (channel-last RGB) on ctx, any dtype: the
// device-side unpatchify, an exact move.
Tensor patches_to_frames(ops::Context& ctx, const Tensor& patches);
// Frames [T, H, W, 3] (host; F32, BF16 or F16) -> video [3, T, H, W] F32, frames spread over
// threads: where decoded frames meet the host's [3, T, H, W] convention.
Tensor frames_to_video(const Tensor& frames);

// The first `frames` frames of F32 host tensors [t_i, ...] stacked along dim 0 (the decoders bring
// each chunk's or window's frames to the host as they finish, so the device holds one at a time).
Tensor concat_frames(const std::vector<Tensor>& parts, int64_t frames);

}  // namespace avdit::models::vae::wan22
