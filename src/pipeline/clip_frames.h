// A video decoder's output as the media writers take it. Decoders return [3, T, H, W] in [-1, 1],
// except MiniMax-H3's video VAE, which returns its golden's ImageNet-normalised space.
#pragma once

#include "core/tensor.h"
#include "models/vae/decoder_factory.h"

namespace avdit::pipeline {

// [T, 3, H, W] float32 in [-1, 1] from a decoder's [3, T, H, W] (H3Video: mapped from ImageNet
// space through [0, 1] first).
Tensor writer_frames(models::vae::Family family, const Tensor& video);

}  // namespace avdit::pipeline
