// Packing of the H3 sequence. Float64 arithmetic follows the reference's order of operations
// (numpy linspace for the spatial grid, cumulative spans for frame times) so that positions agree
// after the float32 cast the model applies.
#include "models/h3/packing.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "models/h3/config.h"

namespace avdit::models::h3 {
namespace {

constexpr int64_t kTextId = -5, kCondId = -11, kAudioFirstId = -15, kAudioId = -14;
constexpr int64_t kVideoFirstId = -3, kVideoId = -2, kVideoLastId = -4, kPadId = -1;
constexpr int64_t kFramePerToken[5] = {1, 4, 4, 4, 4};

// Centered spatial axis of a latent dimension `dim` (patch 2), scaled by 32:
// numpy.linspace(left, left + ratio, dim / 2, endpoint=False) * 32 with ratio = dim / sqrt(H W).
std::vector<double> spatial_axis(int64_t dim, double sqrt_area) {
  const int64_t n = dim / 2;
  const double ratio = static_cast<double>(dim) / sqrt_area;
  const double left = (1.0 - ratio) / 2.0;
  const double right = left + ratio;
  const double step = (right - left) / static_cast<double>(n);
  std::vector<double> g(n);
  for (int64_t k = 0; k < n; ++k) g[k] = (static_cast<double>(k) * step + left) * kSpatialInterp;
  return g;
}

double frame_span(int64_t f) { return kFrameRescale * static_cast<double>(kFramePerToken[f % 5]); }

}  // namespace

PackedLayout pack_layout(int64_t text_len, int64_t latent_t, int64_t latent_h, int64_t latent_w,
                         int64_t audio_t, const std::vector<int64_t>& keyframes,
                         const std::vector<int64_t>& text_token_tags) {
  AVDIT_REQUIRE(text_len > 0 && latent_t > 0 && latent_h > 0 && latent_w > 0 && audio_t > 0,
                "H3 packing: text_len {}, latent T {} H {} W {} and audio T {} must be positive",
                text_len, latent_t, latent_h, latent_w, audio_t);
  AVDIT_REQUIRE(latent_h % 2 == 0 && latent_w % 2 == 0,
                "H3 packing: latent height {} and width {} must be even (patch 1x2x2)", latent_h,
                latent_w);
  const bool kf_ok = keyframes.empty() || keyframes == std::vector<int64_t>{0} ||
                     keyframes == std::vector<int64_t>{-1} ||
                     keyframes == std::vector<int64_t>{0, -1};
  AVDIT_REQUIRE(kf_ok, "H3 packing: keyframe_frame_indices must be empty, [0], [-1] or [0, -1]");
  AVDIT_REQUIRE(text_token_tags.empty() || static_cast<int64_t>(text_token_tags.size()) == text_len,
                "H3 packing: text_token_tags has {} entries, expected text_len {}",
                text_token_tags.size(), text_len);
  for (int64_t tag : text_token_tags)
    AVDIT_REQUIRE(tag == 0 || tag == 1, "H3 packing: text_token_tags must be 0 or 1, found {}", tag);

  PackedLayout p;
  p.text_len = text_len;
  p.latent_t = latent_t;
  p.latent_h = latent_h;
  p.latent_w = latent_w;
  p.audio_t = audio_t;
  p.keyframe_frame_indices = keyframes;
  const int64_t frame_rows = (latent_h / 2) * (latent_w / 2);
  p.condition_rows = static_cast<int64_t>(keyframes.size()) * frame_rows;
  p.audio_rows = kAudioChannels * audio_t;
  p.video_rows = latent_t * frame_rows;
  p.used_len = text_len + p.condition_rows + p.audio_rows + p.video_rows;
  p.seq_len = (p.used_len + kPackedAlignment - 1) / kPackedAlignment * kPackedAlignment;
  const int64_t S = p.seq_len;
  const int64_t cond_begin = text_len, audio_begin = cond_begin + p.condition_rows;
  const int64_t video_begin = audio_begin + p.audio_rows, video_end = video_begin + p.video_rows;

  p.positions.assign(S * 3, 0.0);
  p.token_tags.assign(S, -1);
  p.input_ids.assign(S, kPadId);
  auto set_pos = [&](int64_t row, double t, double h, double w) {
    p.positions[row * 3 + 0] = t;
    p.positions[row * 3 + 1] = h;
    p.positions[row * 3 + 2] = w;
  };

  const double sqrt_area = std::sqrt(static_cast<double>(latent_h * latent_w));
  const std::vector<double> h_grid = spatial_axis(latent_h, sqrt_area);
  const std::vector<double> w_grid = spatial_axis(latent_w, sqrt_area);
  const double origin = static_cast<double>(text_len);

  // Text rows (i, 0, 0).
  for (int64_t i = 0; i < text_len; ++i) {
    p.text_pos.push_back(i);
    set_pos(i, static_cast<double>(i), 0.0, 0.0);
    p.token_tags[i] = text_token_tags.empty() ? 1 : text_token_tags[i];
    p.input_ids[i] = kTextId;
  }

  // Keyframe condition rows: one latent frame each, the target's spatial grid, t at the first
  // frame or at the start of the last frame's span.
  double span_sum = 0.0;
  for (int64_t f = 0; f < latent_t; ++f) span_sum += frame_span(f);
  for (size_t b = 0; b < keyframes.size(); ++b) {
    const double t = keyframes[b] == 0 ? origin : origin + span_sum - kFrameRescale;
    p.keyframe_temporal_positions.push_back(t);
    for (int64_t r = 0; r < frame_rows; ++r) {
      const int64_t row = cond_begin + static_cast<int64_t>(b) * frame_rows + r;
      set_pos(row, t, h_grid[r / (latent_w / 2)], w_grid[r % (latent_w / 2)]);
      p.token_tags[row] = 0;
      p.input_ids[row] = kCondId;
      p.condition_img_pos.push_back(row);
    }
  }

  // Audio rows: all channel-0 steps, then all channel-1 steps; w at the video's w extremes.
  for (int64_t ch = 0; ch < kAudioChannels; ++ch) {
    for (int64_t j = 0; j < audio_t; ++j) {
      const int64_t row = audio_begin + ch * audio_t + j;
      set_pos(row, origin + static_cast<double>(j), 0.0, ch == 0 ? w_grid.front() : w_grid.back());
      p.token_tags[row] = 2;
      p.input_ids[row] = kAudioId;
      p.audio_pos.push_back(row);
    }
  }
  p.input_ids[audio_begin] = kAudioFirstId;

  // Target video rows (t, y, x); frame f starts at origin + sum of the spans before it.
  double frame_t = origin;
  double cumulative = 0.0;
  for (int64_t f = 0; f < latent_t; ++f) {
    if (f > 0) {
      cumulative += frame_span(f - 1);
      frame_t = origin + cumulative;
    }
    for (int64_t r = 0; r < frame_rows; ++r) {
      const int64_t row = video_begin + f * frame_rows + r;
      set_pos(row, frame_t, h_grid[r / (latent_w / 2)], w_grid[r % (latent_w / 2)]);
      p.token_tags[row] = 0;
      p.input_ids[row] = kVideoId;
      p.target_img_pos.push_back(row);
    }
  }
  p.input_ids[video_begin] = kVideoFirstId;
  p.input_ids[video_end - 1] = kVideoLastId;

  p.img_pos = p.condition_img_pos;
  p.img_pos.insert(p.img_pos.end(), p.target_img_pos.begin(), p.target_img_pos.end());
  p.update_mask.assign(p.img_pos.size(), 1);
  std::fill(p.update_mask.begin(), p.update_mask.begin() + p.condition_rows, 0);
  p.update_audio_mask.assign(p.audio_rows, 1);
  p.cu_seqlens = {0, p.used_len, S};
  p.refiner_cu_seqlens = {0, text_len, text_len};
  return p;
}

float timestep_from_sigma(float sigma) { return 1.0f - sigma; }

PackedTimesteps pack_timesteps(const PackedLayout& p, float t_video, float t_audio) {
  std::vector<float> per_row(p.seq_len, t_video);  // text, target video and pad rows
  for (int64_t row : p.audio_pos) per_row[row] = t_audio;
  const float t_cond = std::max(t_video, kVisualCondTimestep);
  for (int64_t row : p.condition_img_pos) per_row[row] = t_cond;
  PackedTimesteps ts;
  ts.unique = per_row;
  std::sort(ts.unique.begin(), ts.unique.end());
  ts.unique.erase(std::unique(ts.unique.begin(), ts.unique.end()), ts.unique.end());
  ts.inverse.resize(p.seq_len);
  for (int64_t r = 0; r < p.seq_len; ++r)
    ts.inverse[r] = std::lower_bound(ts.unique.begin(), ts.unique.end(), per_row[r]) -
                    ts.unique.begin();
  return ts;
}

std::vector<int64_t> adaln_rows(const PackedLayout& layout, const PackedTimesteps& timesteps) {
  AVDIT_CHECK(timesteps.inverse.size() == layout.token_tags.size(), "H3: {} timestep rows for {} tagged rows",
              timesteps.inverse.size(), layout.token_tags.size());
  std::vector<int64_t> rows(layout.token_tags.size());
  for (size_t r = 0; r < rows.size(); ++r)
    rows[r] = timesteps.inverse[r] * kModalities + std::max<int64_t>(layout.token_tags[r], 0);
  return rows;
}

Tensor patchify_video(const Tensor& latent) {
  AVDIT_REQUIRE(latent.ndim() == 5 && latent.size(0) == 1 && latent.size(3) % 2 == 0 &&
                    latent.size(4) % 2 == 0,
                "H3: video latent must be [1, C, T, H, W] with even H and W, found {}",
                latent.shape_str());
  const Tensor x = latent.to_f32();
  const int64_t C = x.size(1), T = x.size(2), H = x.size(3), W = x.size(4);
  const int64_t hp = H / 2, wp = W / 2;
  Tensor rows = Tensor::empty({T * hp * wp, C * 4}, DType::F32);
  const float* src = x.f32();
  float* dst = rows.f32();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t y = 0; y < hp; ++y)
      for (int64_t xx = 0; xx < wp; ++xx) {
        float* row = dst + ((t * hp + y) * wp + xx) * C * 4;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t dy = 0; dy < 2; ++dy)
            for (int64_t dx = 0; dx < 2; ++dx)
              row[c * 4 + dy * 2 + dx] =
                  src[((c * T + t) * H + 2 * y + dy) * W + 2 * xx + dx];
      }
  return rows;
}

Tensor unpatchify_video(const Tensor& rows, int64_t C, int64_t T, int64_t H, int64_t W) {
  const int64_t hp = H / 2, wp = W / 2;
  AVDIT_CHECK(rows.ndim() == 2 && rows.size(0) == T * hp * wp && rows.size(1) == C * 4,
              "unpatchify_video: rows {} do not match [{}, {}]", rows.shape_str(), T * hp * wp,
              C * 4);
  const Tensor r = rows.to_f32();
  Tensor latent = Tensor::empty({1, C, T, H, W}, DType::F32);
  const float* src = r.f32();
  float* dst = latent.f32();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t y = 0; y < hp; ++y)
      for (int64_t xx = 0; xx < wp; ++xx) {
        const float* row = src + ((t * hp + y) * wp + xx) * C * 4;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t dy = 0; dy < 2; ++dy)
            for (int64_t dx = 0; dx < 2; ++dx)
              dst[((c * T + t) * H + 2 * y + dy) * W + 2 * xx + dx] = row[c * 4 + dy * 2 + dx];
      }
  return latent;
}

Tensor pack_audio(const Tensor& latent) {
  AVDIT_REQUIRE(latent.ndim() == 3 && latent.size(0) == kAudioChannels,
                "H3: audio latent must be [2, D, T_audio] (stereo), found {}",
                latent.shape_str());
  const Tensor x = latent.to_f32();
  const int64_t D = x.size(1), T = x.size(2);
  Tensor rows = Tensor::empty({kAudioChannels * T, D}, DType::F32);
  for (int64_t ch = 0; ch < kAudioChannels; ++ch)
    for (int64_t j = 0; j < T; ++j)
      for (int64_t d = 0; d < D; ++d) rows.f32()[(ch * T + j) * D + d] = x.f32()[(ch * D + d) * T + j];
  return rows;
}

Tensor unpack_audio(const Tensor& rows, int64_t audio_t) {
  AVDIT_CHECK(rows.ndim() == 2 && rows.size(0) == kAudioChannels * audio_t,
              "unpack_audio: rows {} do not match {} steps", rows.shape_str(), audio_t);
  const Tensor r = rows.to_f32();
  const int64_t D = r.size(1);
  Tensor latent = Tensor::empty({kAudioChannels, D, audio_t}, DType::F32);
  for (int64_t ch = 0; ch < kAudioChannels; ++ch)
    for (int64_t j = 0; j < audio_t; ++j)
      for (int64_t d = 0; d < D; ++d)
        latent.f32()[(ch * D + d) * audio_t + j] = r.f32()[(ch * audio_t + j) * D + d];
  return latent;
}

std::vector<int32_t> patchify_video_index(int64_t C, int64_t T, int64_t H, int64_t W) {
  AVDIT_REQUIRE(H % 2 == 0 && W % 2 == 0 && C * T * H * W < (int64_t{1} << 31),
                "H3: video latent [1, {}, {}, {}, {}] needs even H and W and < 2^31 elements", C, T, H, W);
  const int64_t hp = H / 2, wp = W / 2;
  std::vector<int32_t> idx(static_cast<size_t>(C * T * H * W));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t y = 0; y < hp; ++y)
      for (int64_t xx = 0; xx < wp; ++xx) {
        const int64_t row = ((t * hp + y) * wp + xx) * C * 4;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t dy = 0; dy < 2; ++dy)
            for (int64_t dx = 0; dx < 2; ++dx)
              idx[row + c * 4 + dy * 2 + dx] = static_cast<int32_t>(((c * T + t) * H + 2 * y + dy) * W + 2 * xx + dx);
      }
  return idx;
}

std::vector<int32_t> unpatchify_video_index(int64_t C, int64_t T, int64_t H, int64_t W) {
  const std::vector<int32_t> fwd = patchify_video_index(C, T, H, W);
  std::vector<int32_t> inv(fwd.size());
  for (size_t i = 0; i < fwd.size(); ++i) inv[fwd[i]] = static_cast<int32_t>(i);
  return inv;
}

std::vector<int32_t> pack_audio_index(int64_t D, int64_t T) {
  AVDIT_REQUIRE(kAudioChannels * D * T < (int64_t{1} << 31), "H3: audio latent [2, {}, {}] too large", D, T);
  std::vector<int32_t> idx(static_cast<size_t>(kAudioChannels * D * T));
  for (int64_t ch = 0; ch < kAudioChannels; ++ch)
    for (int64_t j = 0; j < T; ++j)
      for (int64_t d = 0; d < D; ++d) idx[(ch * T + j) * D + d] = static_cast<int32_t>((ch * D + d) * T + j);
  return idx;
}

std::vector<int32_t> unpack_audio_index(int64_t D, int64_t T) {
  const std::vector<int32_t> fwd = pack_audio_index(D, T);
  std::vector<int32_t> inv(fwd.size());
  for (size_t i = 0; i < fwd.size(); ++i) inv[fwd[i]] = static_cast<int32_t>(i);
  return inv;
}

}  // namespace avdit::models::h3
