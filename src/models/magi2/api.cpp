// forward_from_inputs: config -> weights (memory-mapped) -> packing -> forward -> de-packing (see api.h).
#include "models/magi2/api.h"

#include "core/error.h"
#include "models/magi2/model.h"
#include "models/magi2/packing.h"
#include "models/magi2/weights.h"

namespace avdit::models::magi2 {

Magi2Config config_from_checkpoint(const Checkpoint& ckpt) {
  const nlohmann::json* cfg = ckpt.config();
  AVDIT_REQUIRE(cfg != nullptr, "{}: no config.json next to the checkpoint (the MAGI-2 preview needs its config)",
                ckpt.source().string());
  AVDIT_REQUIRE(is_magi2_config(*cfg), "{}: config.json is not a MAGI-2 preview config (no arch_config with moe_config)",
                ckpt.source().string());
  return parse_magi2_config(*cfg);
}

TensorMap forward_from_inputs(const Checkpoint& ckpt, const TensorMap& inputs, bool dump, bool bf16_activations,
                              const LoadOptions& load) {
  const Magi2Config config = config_from_checkpoint(ckpt);
  const Magi2Weights weights = load_magi2_weights(ckpt, config, load);
  const PackedSequence packed = pack_inputs(config, inputs);
  TensorMap out = forward_packed(weights, packed, ForwardOptions{dump, bf16_activations});
  add_unpacked_outputs(config, packed, dump, out);
  return out;
}

void add_unpacked_outputs(const Magi2Config& config, const PackedSequence& packed, bool dump, TensorMap& out) {
  Tensor video, audio;
  unpack_outputs(config, packed, out.at("model_output"), video, audio);
  out["video_velocity"] = video;
  out["audio_velocity"] = audio;
  if (dump) {
    const int64_t L = packed.tokens();
    out["x"] = packed.x;
    out["coords_mapping"] = packed.coords;
    Tensor modality = Tensor::empty({L}, DType::I32);
    for (int64_t l = 0; l < L; ++l) modality.data<int32_t>()[l] = packed.modality[l];
    out["modality_mapping"] = modality;
    const int64_t nb = static_cast<int64_t>(packed.cu_seqlens.size());
    Tensor cu = Tensor::empty({nb}, DType::I32);
    for (int64_t i = 0; i < nb; ++i) cu.data<int32_t>()[i] = static_cast<int32_t>(packed.cu_seqlens[i]);
    out["cu_seqlens_q"] = cu;
    out["per_token_t"] = packed.per_token_t;
    out["time_token_sequence"] = packed.time_tokens;
  }
}

}  // namespace avdit::models::magi2
