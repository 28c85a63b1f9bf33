// Packing of un-packed MAGI-2 inputs into the model's packed sequence exactly as the reference's data proxy
// (inference/pipeline/preview_data_proxy.py) does it: token order, zero-padded rows, coordinates, modality ids,
// item boundaries, per-token diffusion time and its sinusoidal embedding; the RoPE table; and the de-packing
// of the model output into video / audio velocities.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "models/magi2/config.h"

namespace avdit::models::magi2 {

struct PackedItem {
  int64_t video_tokens = 0;      // T/pT * H/pH * W/pW
  int64_t audio_tokens = 0;      // audio_feat_len[b]
  int64_t audio_len = 0;         // L_a of the un-packed audio latent (rows past audio_tokens are zero on output)
  int64_t text_tokens = 0;       // txt_feat_len[b]
  int64_t begin = 0;             // first packed row of the item
};

struct PackedSequence {
  Tensor x;                      // [L, max(C_v, C_a, C_t)] F32, rows zero-padded
  Tensor coords;                 // [L, 9] F32: (t, h, w, T, H, W, T_ref, H_ref, W_ref)
  std::vector<int32_t> modality; // [L]: 0 video, 1 audio, 2 text
  std::vector<int64_t> cu_seqlens;  // [B + 1] item boundaries (attention segments)
  Tensor per_token_t;            // [L] F32: video/audio diffusion time, 0 for text
  Tensor time_tokens;            // [L, time_channel_dim] F32 = TimeEmb(per_token_t)
  std::vector<PackedItem> items;
  int64_t T = 0, H = 0, W = 0;   // un-packed video latent grid
  int64_t video_channels = 0;    // C of the un-packed video latent (before patchify)
  int64_t tokens() const { return x.defined() ? x.size(0) : 0; }
};

// inputs: video_latent [B, C, T, H, W], audio_latent [B, L_a, C_a], txt_feat [B, L_t, C_t], txt_feat_len [B],
// audio_feat_len [B], per_token_video_t [B, 1, T, H, W], per_token_audio_t [B, L_a, 1].
// BadInput names the input tensor and what the config expects.
PackedSequence pack_inputs(const Magi2Config& config, const TensorMap& inputs);

// sinusoidal_embedding_1d of the reference: pos = t * 1000, f_k = exp(-ln(10000) k / (dim/2)) in float32,
// [cos(pos f), sin(pos f)] (a zero column when dim is odd; t itself when dim == 1). t: [L] -> [L, dim].
Tensor time_embedding(const Tensor& t, int64_t dim);

// ElementWiseFourierEmbed: coords [L, 9], bands [B] -> [L, 6B] = [sin(proj) | cos(proj)], (axis, band) order.
Tensor rope_table(const Tensor& coords, const Tensor& bands);

// model_output [L, max(C_v, C_a)] -> video_velocity [B, C, T, H, W] and audio_velocity [B, L_a, C_a].
void unpack_outputs(const Magi2Config& config, const PackedSequence& packed, const Tensor& model_output,
                    Tensor& video_velocity, Tensor& audio_velocity);

}  // namespace avdit::models::magi2
