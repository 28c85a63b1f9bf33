// The chunk and tile arithmetic of the reference's decode_temporal, _decode_temporal_pad_frames
// and split_tiles (plan.h).
#include "models/vae/h3video/plan.h"

#include <algorithm>

#include "core/error.h"

namespace avdit::models::vae::h3video {

int64_t TemporalPlan::end(int64_t i, int64_t padded) const {
  return std::min(i * K + K + O, padded);
}

TemporalPlan plan_temporal(const H3VideoConfig& c, int64_t T) {
  AVDIT_REQUIRE(T >= 1, "H3 video VAE: latents have {} frames, at least 1 is needed", T);
  TemporalPlan p;
  const int64_t r = c.ratio_t;
  p.K = (c.clip_length + r - 1) / r;
  p.P = ((-c.clip_length) % r + r) % r;
  p.O = ((-c.token_drop) % p.K + p.K) % p.K;
  p.F = std::max<int64_t>(p.O * r - p.P, 0);
  p.chunk_dec = p.K * r;
  p.splits = c.token_drop > 0 ? 2 : 1;
  // The latent as if token_drop more frames had been encoded, padded to whole chunks.
  const int64_t pseudo = T + c.token_drop;
  p.pad_tokens = (p.K - pseudo % p.K) % p.K;
  p.num_chunks = (pseudo + p.pad_tokens) / p.K - (c.token_drop > 0 ? 1 : 0);
  AVDIT_REQUIRE(p.num_chunks >= 1, "H3 video VAE: {} latent frames make no temporal chunk", T);
  // Frames written: each chunk's first part less P, the last pending part, less the frames the
  // padding tokens produced (clip_length mod ratio_t for a token that starts a clip, else ratio_t).
  const int64_t padded = T + p.pad_tokens;
  int64_t total = 0, pending = 0;
  for (int64_t i = 0; i < p.num_chunks; ++i) {
    const int64_t frames = (p.end(i, padded) - std::min(p.begin(i), padded)) * r;
    for (int64_t j = 0; j < p.splits; ++j) {
      const int64_t f0 = j * p.chunk_dec, f1 = std::min(f0 + p.chunk_dec, frames);
      const int64_t part = std::max<int64_t>(f1 - f0 - p.P, 0);
      if (j == 0)
        total += part;
      else
        pending = part;
    }
  }
  total += pending;
  const int64_t tail = c.clip_length % r;
  int64_t pad_frames = 0;
  for (int64_t k = 0; k < p.pad_tokens; ++k)
    pad_frames += tail != 0 && (T + k) % p.K == 0 ? tail : r;
  p.output_frames = total - pad_frames;
  AVDIT_REQUIRE(p.output_frames > 0, "H3 video VAE: {} latent frames decode to no frame", T);
  return p;
}

AxisTiles split_tiles(int64_t length, int64_t tile, int64_t overlap_min, int64_t ratio) {
  AxisTiles t;
  if (tile >= length) {
    t.start = {0};
    t.len = length;
    return t;
  }
  AVDIT_REQUIRE(tile % ratio == 0 && overlap_min % ratio == 0 && overlap_min < tile,
                "H3 video VAE: tile {} px with overlap {} px: both must be multiples of {} and "
                "the overlap below the tile",
                tile, overlap_min, ratio);
  int64_t n = (length + tile - 1) / tile, remaining = 0;
  for (;; ++n) {
    remaining = tile * n - overlap_min * (n - 1) - length;
    if (remaining >= 0) break;
  }
  t.overlap.assign(static_cast<size_t>(n - 1), overlap_min);
  for (int64_t u = 0; u < remaining / ratio; ++u)
    t.overlap[static_cast<size_t>(u % (n - 1))] += ratio;
  t.start = {0};
  for (int64_t i = 0; i + 1 < n; ++i) t.start.push_back(t.start.back() + tile - t.overlap[i]);
  t.len = tile;
  return t;
}

}  // namespace avdit::models::vae::h3video
