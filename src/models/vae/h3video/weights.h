// The H3 video VAE decoder's weights under the release's state_dict names (post_quant_conv.*,
// decoder.*), placed on the execution context. LayerScale (scale1, scale2) multiplies the output
// of one linear per branch, so it is folded into that linear's rows (and bias) at load: the
// forward then adds the branch to the residual inside the GEMM.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "models/vae/h3video/config.h"

namespace avdit {
class Checkpoint;
}
namespace avdit::ops {
class Context;
}

namespace avdit::models::vae::h3video {

struct BlockWeights {
  Tensor norm1, norm2;         // [D] RMSNorm weights
  Tensor to_qkv, to_qkv_bias;  // [3D, D], [3D]: per head [q | k | v]
  Tensor to_out, to_out_bias;  // [D, D], [D], times scale1
  Tensor w1, w1_bias;          // [8D, D], [8D]: [gate | up]
  Tensor w2, w2_bias;          // [D, 4D], [D], times scale2
};

struct H3VideoWeights {
  Tensor denorm, denorm_bias;  // diag(latents_std) [Z, Z] and latents_mean [Z]: latent * std + mean
  Tensor post_quant_conv, post_quant_conv_bias;  // [Z, Z] (the 1x1x1 Conv3d), [Z]
  Tensor x_embedder, x_embedder_bias;            // [D, Z], [D]
  Tensor register_tokens;                        // [R, D]
  std::vector<BlockWeights> blocks;
  Tensor norm_out, norm_out_bias;  // [D] LayerNorm
  Tensor proj_out, proj_out_bias;  // [3 * 4 * 16 * 16, D], [...]
};

// Checks every tensor (name, shape, float dtype) before placing any; BadInput naming the file and
// the tensor. The blocks' linear weights are placed in `act` (F32 or BF16), everything else in F32.
// bytes: the weight bytes placed on the context.
H3VideoWeights load_weights(ops::Context& ctx, const Checkpoint& ckpt, const H3VideoConfig& c,
                            DType act, int64_t* bytes = nullptr);

// The names the decoder reads (the encoder's and the mask token are not).
bool is_needed(std::string_view name);

}  // namespace avdit::models::vae::h3video
