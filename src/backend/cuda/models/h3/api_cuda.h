// Entry points of the H3 CUDA forward for the CLI and tests: the same unpacked inputs and output
// names as models::h3::forward_from_inputs / velocity (api.h), run by an H3CudaModel.
#pragma once

#include "backend/cuda/models/h3/model_cuda.h"
#include "models/h3/api.h"

namespace avdit::cuda::h3 {

// `avdit forward --device cuda`: inputs as models::h3::forward_from_inputs (video_latent,
// audio_latent, text_embeds, t_* or sigma_*, optional cond_latent + keyframe_frame_indices,
// text_token_tags); returns video_out, audio_out, video_out_latent, audio_out_latent and, with
// `dump`, the intermediates the model can name cheaply (see H3CudaModel).
TensorMap forward_from_inputs(H3CudaModel& model, const TensorMap& inputs, bool dump);

// The sampler's per-step call (text_refined from model.refine_text, once per prompt).
models::h3::Velocity velocity(H3CudaModel& model, const models::h3::VelocityRequest& request);

}  // namespace avdit::cuda::h3
