// Entry points of the MAGI-2 preview family for the app: one forward from un-packed inputs, and writing a
// random-weight checkpoint for any config of the family.
#pragma once

#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "models/magi2/config.h"
#include "models/magi2/packing.h"
#include "models/magi2/weights.h"

namespace avdit::models::magi2 {

// The checkpoint's config.json parsed (BadInput when there is none or it is not the MAGI-2 preview schema).
Magi2Config config_from_checkpoint(const Checkpoint& ckpt);

// Packs `inputs` (video_latent, audio_latent, txt_feat, txt_feat_len, audio_feat_len, per_token_video_t,
// per_token_audio_t, as the fixture's inputs.safetensors), computes the time embedding, runs the forward and
// returns video_velocity, audio_velocity and model_output; with dump also the packed inputs (x, coords_mapping,
// modality_mapping, cu_seqlens_q, per_token_t, time_token_sequence) and every intermediate by fixture name.
// bf16_activations: the emulated bf16 production precision (ForwardOptions in model.h); default fp32.
// load: weight loading options (e.g. nvfp4_experts: pack the routed experts at load time).
TensorMap forward_from_inputs(const Checkpoint& ckpt, const TensorMap& inputs, bool dump,
                              bool bf16_activations = false, const LoadOptions& load = {});

// The outputs forward_from_inputs adds to a forward's "model_output" (any backend's): video_velocity
// and audio_velocity unpacked; with dump also the packed inputs (x, coords_mapping, modality_mapping,
// cu_seqlens_q, per_token_t, time_token_sequence).
void add_unpacked_outputs(const Magi2Config& config, const PackedSequence& packed, bool dump, TensorMap& out);

// Writes config.json and a random-weight checkpoint (official names, layouts, dtypes; sharded with an index when
// large) to out_dir. Values depend only on (seed, tensor name, element index).
void init_checkpoint(const nlohmann::json& config, const std::filesystem::path& out_dir, uint64_t seed);

}  // namespace avdit::models::magi2
