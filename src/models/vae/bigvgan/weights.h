// Checkpoint -> H3AudioWeights: every tensor the decode path reads, checked before use; the widths
// come from dec_in_proj and conv_pre.
#pragma once

#include <string>

#include "models/vae/bigvgan/decoder.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::vae::bigvgan {

// decoder_dim: set to conv_pre's output width.
H3AudioWeights load_weights(ops::Context& ctx, const Checkpoint& ckpt, const H3AudioConfig& config,
                            int64_t* decoder_dim);

}  // namespace avdit::models::vae::bigvgan
