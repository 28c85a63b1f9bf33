// The packed H3 sequence [text | keyframe-condition video | audio | target video | pad]: row
// layout, RoPE positions, token tags, per-row timesteps and attention documents, exactly as the
// reference's minimax_h3_packed_sequence builds them; plus video patchify and audio row packing.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace avdit::models::h3 {

// Structure-only layout: depends on the sizes, keyframes and text tags, not on the step.
struct PackedLayout {
  int64_t text_len = 0;
  int64_t latent_t = 0, latent_h = 0, latent_w = 0;  // target video latent [1, C, T, H, W]
  int64_t audio_t = 0;                               // audio latent [2, D, T_a]
  int64_t condition_rows = 0, audio_rows = 0, video_rows = 0;
  int64_t used_len = 0;  // live rows
  int64_t seq_len = 0;   // S: used_len rounded up to a multiple of 64
  std::vector<int64_t> text_pos;           // [L]
  std::vector<int64_t> condition_img_pos;  // keyframe rows, in keyframe order
  std::vector<int64_t> target_img_pos;     // target video rows, (t, y, x) order
  std::vector<int64_t> img_pos;            // condition rows then target rows
  std::vector<int64_t> audio_pos;          // channel 0 steps, then channel 1 steps
  std::vector<uint8_t> update_mask;        // per img_pos row: 1 target, 0 condition
  std::vector<uint8_t> update_audio_mask;  // per audio row: all 1
  std::vector<double> positions;           // [S, 3] (t, h, w), float64 as built
  std::vector<int64_t> token_tags;         // [S]: 1 text, 0 visual, 2 audio, -1 pad
  std::vector<int64_t> input_ids;          // [S]: structural ids (debugging only)
  std::vector<int64_t> cu_seqlens;         // {0, used_len, S}
  std::vector<int64_t> refiner_cu_seqlens; // {0, L, L}
  std::vector<int64_t> keyframe_frame_indices;       // 0 = first, -1 = last
  std::vector<double> keyframe_temporal_positions;   // RoPE t of each keyframe block
};

// Builds the layout. `keyframe_frame_indices` is empty (T2VA), {0}, {-1} or {0, -1} (FL2VA).
// `text_token_tags` is empty (all text rows tag 1) or one 0/1 per text row (0 = a vision token of
// the multimodal prompt, which takes the video adaLN slice). BadInput on anything else.
PackedLayout pack_layout(int64_t text_len, int64_t latent_t, int64_t latent_h, int64_t latent_w,
                         int64_t audio_t, const std::vector<int64_t>& keyframe_frame_indices = {},
                         const std::vector<int64_t>& text_token_tags = {});

// Per-step timesteps: t = 1 - sigma per modality. Text, target video and pad rows use t_video,
// audio rows t_audio, keyframe rows max(t_video, 0.999).
struct PackedTimesteps {
  std::vector<float> unique;      // [M], sorted ascending, distinct
  std::vector<int64_t> inverse;   // [S]: index into unique
};
PackedTimesteps pack_timesteps(const PackedLayout& layout, float t_video, float t_audio);

// The adaLN table row of each packed row: timestep index * kModalities + modality tag (pad rows, tag
// -1, use the video row 0). [S]; the reference's combined_indices.
std::vector<int64_t> adaln_rows(const PackedLayout& layout, const PackedTimesteps& timesteps);

// t = float32(1 - sigma), as the reference computes it from a float32 sigma.
float timestep_from_sigma(float sigma);

// Video latent [1, C, T, H, W] F32 -> rows [T * H/2 * W/2, 4C] ordered (t, y, x); row index
// c*4 + dy*2 + dx holds latent[0, c, t, 2y+dy, 2x+dx].
Tensor patchify_video(const Tensor& latent);
// Inverse of patchify_video: rows [T * H/2 * W/2, 4C] -> [1, C, T, H, W].
Tensor unpatchify_video(const Tensor& rows, int64_t channels, int64_t t, int64_t h, int64_t w);
// Audio latent [2, D, T_a] -> rows [2 T_a, D]: row ch * T_a + j = latent[ch, :, j].
Tensor pack_audio(const Tensor& latent);
// Inverse of pack_audio: rows [2 T_a, D] -> [2, D, T_a].
Tensor unpack_audio(const Tensor& rows, int64_t audio_t);

// The same moves as element indices, for ops::gather_elements on any context (packing on the device):
// out.flat[i] = in.flat[index[i]].
std::vector<int32_t> patchify_video_index(int64_t C, int64_t T, int64_t H, int64_t W);    // latent -> rows
std::vector<int32_t> unpatchify_video_index(int64_t C, int64_t T, int64_t H, int64_t W);  // rows -> latent
std::vector<int32_t> pack_audio_index(int64_t D, int64_t T);                               // latent -> rows
std::vector<int32_t> unpack_audio_index(int64_t D, int64_t T);                             // rows -> latent

}  // namespace avdit::models::h3
