// Packing of un-packed MAGI-2 inputs into the model's packed sequence exactly as the reference's
// data proxy (inference/pipeline/preview_data_proxy.py) does it: token order, zero-padded rows,
// coordinates, modality ids, item boundaries, per-token diffusion time and its sinusoidal
// embedding; the de-packing of the model output into video / audio velocities; and both as element
// indices, for packing on a context (a sampler's steps).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "models/magi2/config.h"

namespace avdit::models::magi2 {

struct PackedItem {
  int64_t video_tokens = 0;  // T/pT * H/pH * W/pW
  int64_t audio_tokens = 0;  // audio_feat_len[b]
  int64_t audio_len =
      0;  // L_a of the un-packed audio latent (rows past audio_tokens are zero on output)
  int64_t text_tokens = 0;  // txt_feat_len[b]
  int64_t begin = 0;        // first packed row of the item
};

struct PackedSequence {
  Tensor x;                         // [L, max(C_v, C_a, C_t)] F32, rows zero-padded
  Tensor coords;                    // [L, 9] F32: (t, h, w, T, H, W, T_ref, H_ref, W_ref)
  std::vector<int32_t> modality;    // [L]: 0 video, 1 audio, 2 text
  std::vector<int64_t> cu_seqlens;  // [B + 1] item boundaries (attention segments)
  Tensor per_token_t;               // [L] F32: video/audio diffusion time, 0 for text
  Tensor time_tokens;               // [L, time_channel_dim] F32 = TimeEmb(per_token_t)
  std::vector<PackedItem> items;
  int64_t T = 0, H = 0, W = 0;  // un-packed video latent grid
  int64_t video_channels = 0;   // C of the un-packed video latent (before patchify)
  int64_t tokens() const { return x.defined() ? x.size(0) : 0; }
};

// inputs: video_latent [B, C, T, H, W], audio_latent [B, L_a, C_a], txt_feat [B, L_t, C_t],
// txt_feat_len [B], audio_feat_len [B], per_token_video_t [B, 1, T, H, W], per_token_audio_t [B,
// L_a, 1]. BadInput names the input tensor and what the config expects.
PackedSequence pack_inputs(const Magi2Config& config, const TensorMap& inputs);

// sinusoidal_embedding_1d of the reference on the host (ops::time_embedding's CPU reference with
// the reference's frequency table): t [L] -> [L, dim].
Tensor time_embedding(const Tensor& t, int64_t dim);

// model_output [L, max(C_v, C_a)] -> video_velocity [B, C, T, H, W] and audio_velocity [B, L_a,
// C_a].
void unpack_outputs(const Magi2Config& config, const PackedSequence& packed,
                    const Tensor& model_output, Tensor& video_velocity, Tensor& audio_velocity);

// A sampler's packing: B items (the conditional and unconditional prompts) that share one video
// latent [1, C, T, H, W] and one audio latent [1, L_a, C_a] (every audio row used), item b with
// text_lens[b] rows of a text stack [B, L_t, C_t]. The moves as element indices
// (ops::gather_elements), built once per shape:
//   x.flat[i] = source.flat[x[i]], source = [video | audio | text stack | 0] flattened (zero: the
//   last) item b's video velocity [1, C, T, H, W] .flat[i] = model_output.flat[video_out[b][i]],
//   audio likewise.
// layout: the packed sequence's structure (modality, coords, cu_seqlens, items, grid; x and the
// times undefined); noisy[l]: 1 for video and audio tokens (per-token t = the step's t), 0 for text
// (t = 0).
struct PackingIndex {
  PackedSequence layout;
  std::vector<int32_t> x;
  int64_t source_size = 0;
  std::vector<uint8_t> noisy;
  std::vector<std::vector<int32_t>> video_out, audio_out;
};
PackingIndex packing_index(const Magi2Config& config, const Shape& video, const Shape& audio,
                           const std::vector<int64_t>& text_lens, int64_t text_rows);

}  // namespace avdit::models::magi2
