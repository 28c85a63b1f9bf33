// Checkpoint -> OobleckWeights: every tensor the decode path reads, checked against the config's
// shapes before use. The release stores them under "pretransform.model.decoder.", the goldens
// under "decoder.".
#pragma once

#include "models/vae/oobleck/config.h"
#include "models/vae/oobleck/decoder.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::vae::oobleck {

OobleckWeights load_weights(ops::Context& ctx, const Checkpoint& ckpt, const OobleckConfig& c);

}  // namespace avdit::models::vae::oobleck
