// Where the H3 video decoder cuts a latent clip: temporal chunks (decode_temporal: chunks of K
// latent frames plus O overlap tokens, stitched with a cross-fade of F frames) and spatial tiles
// (split_tiles: equal tiles whose overlaps grow 16 px at a time round-robin until they cover the
// axis). Host arithmetic only, so it is tested on its own and shared by every backend.
#pragma once

#include <cstdint>
#include <vector>

#include "models/vae/h3video/config.h"

namespace avdit::models::vae::h3video {

struct TemporalPlan {
  int64_t K = 0;          // tokens_chunk_size = ceil(clip_length / ratio_t)
  int64_t O = 0;          // token_overlap = (-token_drop) mod K
  int64_t P = 0;          // frame_pre_padding = (-clip_length) mod ratio_t: cut from each part
  int64_t F = 0;          // frame_overlap = max(O ratio_t - P, 0): cross-faded frames
  int64_t chunk_dec = 0;  // K ratio_t: frames of a chunk's first part
  int64_t splits = 1;     // parts per chunk: 2 (written part, pending overlap) when token_drop > 0
  int64_t num_chunks = 0;
  int64_t pad_tokens = 0;     // copies of the last latent frame appended
  int64_t output_frames = 0;  // frames after cutting the padding's frames
  // Latent frames [begin, end) of the padded latent that chunk i decodes.
  int64_t begin(int64_t i) const { return i * K; }
  int64_t end(int64_t i, int64_t padded) const;
};

// BadInput when T latent frames cannot be decoded (none).
TemporalPlan plan_temporal(const H3VideoConfig& c, int64_t T);

struct AxisTiles {
  std::vector<int64_t> start;    // pixels
  int64_t len = 0;               // every tile's length in pixels
  std::vector<int64_t> overlap;  // [tiles - 1]: pixels shared by tile i and i + 1
};

// split_tiles of an axis of `length` pixels (a multiple of ratio): one tile when it fits,
// otherwise the fewest tiles of `tile` pixels overlapping by at least overlap_min.
AxisTiles split_tiles(int64_t length, int64_t tile, int64_t overlap_min, int64_t ratio);

}  // namespace avdit::models::vae::h3video
