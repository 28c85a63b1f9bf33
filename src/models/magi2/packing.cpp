// Packing and de-packing of the MAGI-2 preview (see packing.h): the host moves, and the same moves
// as element indices for packing on a context.
#include "models/magi2/packing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "ops/embedding.h"

namespace avdit::models::magi2 {
namespace {

const Tensor& require_input(const TensorMap& inputs, const char* name, int ndim,
                            const char* layout) {
  auto it = inputs.find(name);
  AVDIT_REQUIRE(it != inputs.end(), "magi2 inputs: missing tensor '{}' (expected {})", name,
                layout);
  AVDIT_REQUIRE(it->second.ndim() == ndim, "magi2 inputs: '{}' has shape {}, expected {}", name,
                it->second.shape_str(), layout);
  return it->second;
}

// Integer lengths stored as any integer or float dtype.
std::vector<int64_t> read_lengths(const TensorMap& inputs, const char* name, int64_t batch,
                                  int64_t fallback) {
  auto it = inputs.find(name);
  if (it == inputs.end()) return std::vector<int64_t>(batch, fallback);
  const Tensor& t = it->second;
  AVDIT_REQUIRE(t.numel() == batch,
                "magi2 inputs: '{}' has shape {}, expected [{}] (one length per item)", name,
                t.shape_str(), batch);
  Tensor as_i64 = t.to(DType::I64);
  const int64_t* v = as_i64.data<int64_t>();
  std::vector<int64_t> out(v, v + batch);
  for (int64_t b = 0; b < batch; ++b)
    AVDIT_REQUIRE(out[b] >= 0 && out[b] <= fallback, "magi2 inputs: {}[{}] = {} is outside [0, {}]",
                  name, b, out[b], fallback);
  return out;
}

}  // namespace

Tensor time_embedding(const Tensor& t, int64_t dim) {
  Tensor out = Tensor::zeros({t.numel(), dim}, DType::F32);
  if (dim > 0) ops::cpu::time_embedding(t, ops::time_frequencies(dim), out);
  return out;
}

PackedSequence pack_inputs(const Magi2Config& cfg, const TensorMap& inputs) {
  const Tensor video = require_input(inputs, "video_latent", 5, "[B, C, T, H, W]").to_f32();
  const Tensor audio = require_input(inputs, "audio_latent", 3, "[B, L_a, C_a]").to_f32();
  const Tensor text = require_input(inputs, "txt_feat", 3, "[B, L_t, C_t]").to_f32();
  const int64_t B = video.size(0), C = video.size(1), T = video.size(2), H = video.size(3),
                W = video.size(4);
  const int64_t pt = cfg.data_proxy.t_patch_size, ps = cfg.data_proxy.patch_size;
  AVDIT_REQUIRE(audio.size(0) == B && text.size(0) == B,
                "magi2 inputs: batch sizes differ: video_latent {}, audio_latent {}, txt_feat {}",
                video.shape_str(), audio.shape_str(), text.shape_str());
  AVDIT_REQUIRE(
      T % pt == 0 && H % ps == 0 && W % ps == 0,
      "magi2 inputs: video_latent {} is not divisible by the patch size (t {}, spatial {})",
      video.shape_str(), pt, ps);
  const int64_t patch_vol = pt * ps * ps;
  AVDIT_REQUIRE(
      C * patch_vol == cfg.video_in_channels,
      "magi2 inputs: video_latent has {} channels ({} per patched token), the model expects {} "
      "(arch_config.video_in_channels)",
      C, C * patch_vol, cfg.video_in_channels);
  AVDIT_REQUIRE(audio.size(2) == cfg.audio_in_channels,
                "magi2 inputs: audio_latent has {} channels, the model expects {} "
                "(arch_config.audio_in_channels)",
                audio.size(2), cfg.audio_in_channels);
  AVDIT_REQUIRE(
      text.size(2) == cfg.text_in_channels,
      "magi2 inputs: txt_feat has {} channels, the model expects {} (arch_config.text_in_channels)",
      text.size(2), cfg.text_in_channels);
  const int64_t La = audio.size(1), Lt = text.size(1);
  const std::vector<int64_t> txt_len = read_lengths(inputs, "txt_feat_len", B, Lt);
  const std::vector<int64_t> audio_len = read_lengths(inputs, "audio_feat_len", B, La);

  const int64_t tc = cfg.data_proxy.time_channel_dim;
  Tensor ptv_, pta_;
  if (tc > 0) {
    ptv_ = require_input(inputs, "per_token_video_t", 5, "[B, 1, T, H, W]").to_f32();
    const Tensor& ptv = ptv_;
    AVDIT_REQUIRE(ptv.size(0) == B && ptv.size(2) == T && ptv.size(3) == H && ptv.size(4) == W,
                  "magi2 inputs: per_token_video_t has shape {}, expected [{}, 1, {}, {}, {}]",
                  ptv.shape_str(), B, T, H, W);
    auto it = inputs.find("per_token_audio_t");
    AVDIT_REQUIRE(it != inputs.end(),
                  "magi2 inputs: missing tensor 'per_token_audio_t' (expected [B, L_a, 1])");
    pta_ = it->second.to_f32();
    const Tensor& pta = pta_;
    AVDIT_REQUIRE(pta.ndim() >= 2 && pta.size(0) == B && pta.size(1) == La && pta.numel() == B * La,
                  "magi2 inputs: per_token_audio_t has shape {}, expected [{}, {}, 1]",
                  pta.shape_str(), B, La);
  }

  const int64_t Ts = T / pt, Hs = H / ps, Ws = W / ps, nv = Ts * Hs * Ws;
  PackedSequence out;
  out.T = T;
  out.H = H;
  out.W = W;
  out.video_channels = C;
  int64_t L = 0;
  out.cu_seqlens.push_back(0);
  for (int64_t b = 0; b < B; ++b) {
    PackedItem it;
    it.begin = L;
    it.video_tokens = nv;
    it.audio_tokens = audio_len[b];
    it.audio_len = La;
    it.text_tokens = txt_len[b];
    L += nv + audio_len[b] + txt_len[b];
    out.items.push_back(it);
    out.cu_seqlens.push_back(L);
  }
  const int64_t width = cfg.max_in_channels;
  out.x = Tensor::zeros({L, width}, DType::F32);
  out.coords = Tensor::zeros({L, 9}, DType::F32);
  out.per_token_t = Tensor::zeros({L}, DType::F32);
  out.modality.assign(L, kText);
  float* x = out.x.f32();
  float* co = out.coords.f32();
  float* pt_out = out.per_token_t.f32();
  const float* v = video.f32();
  const float* a = audio.f32();
  const float* tx = text.f32();
  const bool inter = cfg.data_proxy.spatial_rope_interpolation == "inter";
  const float href = inter ? 32.0f : static_cast<float>(Hs),
              wref = inter ? 32.0f : static_cast<float>(Ws);

  auto set_coords = [&](int64_t row, float t, float h, float w, float ts, float hs, float ws,
                        float tr, float hr, float wr) {
    float* r = co + row * 9;
    r[0] = t;
    r[1] = h;
    r[2] = w;
    r[3] = ts;
    r[4] = hs;
    r[5] = ws;
    r[6] = tr;
    r[7] = hr;
    r[8] = wr;
  };

  for (int64_t b = 0; b < B; ++b) {
    const PackedItem& item = out.items[b];
    int64_t row = item.begin;
    // 1. video: patch (tt, hh, ww) in (T, H, W) order; features (C, pT, pH, pW) with C slowest
    // (unfold).
    for (int64_t tt = 0; tt < Ts; ++tt)
      for (int64_t hh = 0; hh < Hs; ++hh)
        for (int64_t ww = 0; ww < Ws; ++ww, ++row) {
          float* xr = x + row * width;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < pt; ++i)
              for (int64_t j = 0; j < ps; ++j)
                for (int64_t k = 0; k < ps; ++k) {
                  const int64_t src =
                      (((b * C + c) * T + tt * pt + i) * H + hh * ps + j) * W + ww * ps + k;
                  xr[((c * pt + i) * ps + j) * ps + k] = v[src];
                }
          out.modality[row] = kVideo;
          set_coords(row, tt, hh, ww, Ts, Hs, Ws, Ts, href, wref);
          // The first element of each patch of per_token_video_t (img2tokens(...)[:, :, :1]).
          if (tc > 0)
            pt_out[row] =
                std::as_const(ptv_)
                    .f32()[(((b * ptv_.size(1)) * T + tt * pt) * H + hh * ps) * W + ww * ps];
        }
    // 2. audio: the first audio_feat_len rows; time reference (L_a - 1) // 8 + 1 (then //
    // t_patch_size).
    const int64_t na = item.audio_tokens;
    const float audio_ref = static_cast<float>(((na - 1) / 8 + 1) / pt);
    for (int64_t i = 0; i < na; ++i, ++row) {
      std::memcpy(x + row * width, a + (b * La + i) * cfg.audio_in_channels,
                  sizeof(float) * cfg.audio_in_channels);
      out.modality[row] = kAudio;
      set_coords(row, i, 0, 0, na, 1, 1, audio_ref, 1, 1);
      if (tc > 0) pt_out[row] = std::as_const(pta_).f32()[b * La + i];
    }
    // 3. text: the first txt_feat_len rows, time positions j - L_t, reference 1 (no time rotation),
    // t = 0.
    const int64_t nt = item.text_tokens;
    for (int64_t j = 0; j < nt; ++j, ++row) {
      std::memcpy(x + row * width, tx + (b * Lt + j) * cfg.text_in_channels,
                  sizeof(float) * cfg.text_in_channels);
      out.modality[row] = kText;
      set_coords(row, static_cast<float>(j - nt), 0, 0, nt, 1, 1, 1, 1, 1);
    }
    AVDIT_CHECK(row == out.cu_seqlens[b + 1], "packing row count");
  }
  out.time_tokens = time_embedding(out.per_token_t, tc);
  return out;
}

void unpack_outputs(const Magi2Config& cfg, const PackedSequence& packed,
                    const Tensor& model_output, Tensor& video_velocity, Tensor& audio_velocity) {
  const int64_t B = static_cast<int64_t>(packed.items.size());
  const int64_t pt = cfg.data_proxy.t_patch_size, ps = cfg.data_proxy.patch_size;
  const int64_t T = packed.T, H = packed.H, W = packed.W, Ts = T / pt, Hs = H / ps, Ws = W / ps;
  const int64_t C = cfg.video_in_channels / (pt * ps * ps), Ca = cfg.audio_in_channels;
  const int64_t width = model_output.size(1);
  const Tensor mo = model_output.to_f32();
  const float* m = mo.f32();
  video_velocity = Tensor::zeros({B, C, T, H, W}, DType::F32);
  const int64_t La = B > 0 ? packed.items[0].audio_len : 0;
  audio_velocity = Tensor::zeros({B, La, Ca}, DType::F32);
  float* vv = video_velocity.f32();
  float* av = audio_velocity.f32();
  for (int64_t b = 0; b < B; ++b) {
    const PackedItem& item = packed.items[b];
    int64_t row = item.begin;
    // The reference de-packs "(T H W) (pT pH pW C) -> C (T pT) (H pH) (W pW)" (C fastest on the way
    // out).
    for (int64_t tt = 0; tt < Ts; ++tt)
      for (int64_t hh = 0; hh < Hs; ++hh)
        for (int64_t ww = 0; ww < Ws; ++ww, ++row)
          for (int64_t i = 0; i < pt; ++i)
            for (int64_t j = 0; j < ps; ++j)
              for (int64_t k = 0; k < ps; ++k)
                for (int64_t c = 0; c < C; ++c)
                  vv[(((b * C + c) * T + tt * pt + i) * H + hh * ps + j) * W + ww * ps + k] =
                      m[row * width + ((i * ps + j) * ps + k) * C + c];
    for (int64_t i = 0; i < item.audio_tokens; ++i, ++row)
      std::memcpy(av + (b * La + i) * Ca, m + row * width, sizeof(float) * Ca);
  }
}

PackingIndex packing_index(const Magi2Config& cfg, const Shape& video, const Shape& audio,
                           const std::vector<int64_t>& text_lens, int64_t text_rows) {
  AVDIT_REQUIRE(video.size() == 5 && video[0] == 1,
                "magi2 packing: video latent {} (expected [1, C, T, H, W])", shape_str(video));
  AVDIT_REQUIRE(audio.size() == 3 && audio[0] == 1,
                "magi2 packing: audio latent {} (expected [1, L_a, C_a])", shape_str(audio));
  const int64_t B = static_cast<int64_t>(text_lens.size());
  AVDIT_REQUIRE(B >= 1, "magi2 packing: no items");
  const int64_t C = video[1], T = video[2], H = video[3], W = video[4], La = audio[1],
                Ca = audio[2];
  const int64_t Ct = cfg.text_in_channels, tc = cfg.data_proxy.time_channel_dim;
  // The structure (and every check) from pack_inputs on zero latents of these shapes.
  TensorMap in;
  in["video_latent"] = Tensor::zeros({B, C, T, H, W}, DType::F32);
  in["audio_latent"] = Tensor::zeros({B, La, Ca}, DType::F32);
  in["txt_feat"] = Tensor::zeros({B, text_rows, Ct}, DType::F32);
  in["txt_feat_len"] = Tensor::from_data({B}, DType::I64, text_lens.data());
  const std::vector<int64_t> audio_len(B, La);
  in["audio_feat_len"] = Tensor::from_data({B}, DType::I64, audio_len.data());
  if (tc > 0) {
    in["per_token_video_t"] = Tensor::zeros({B, 1, T, H, W}, DType::F32);
    in["per_token_audio_t"] = Tensor::zeros({B, La, 1}, DType::F32);
  }
  PackingIndex r;
  r.layout = pack_inputs(cfg, in);
  r.layout.x = r.layout.per_token_t = r.layout.time_tokens = Tensor();
  const int64_t L = static_cast<int64_t>(r.layout.modality.size()), width = cfg.max_in_channels,
                out_w = cfg.out_channels;
  const int64_t pt = cfg.data_proxy.t_patch_size, ps = cfg.data_proxy.patch_size;
  const int64_t Ts = T / pt, Hs = H / ps, Ws = W / ps, V = C * T * H * W, A = La * Ca;
  const int64_t zero = V + A + B * text_rows * Ct;
  r.source_size = zero + 1;
  AVDIT_REQUIRE(
      r.source_size < (int64_t{1} << 31) && L * std::max(width, out_w) < (int64_t{1} << 31),
      "magi2 packing: {} tokens of {} channels exceed 32-bit element indices", L, width);
  r.x.assign(static_cast<size_t>(L * width), static_cast<int32_t>(zero));
  r.noisy.assign(static_cast<size_t>(L), 0);
  r.video_out.assign(B, std::vector<int32_t>(static_cast<size_t>(V)));
  r.audio_out.assign(B, std::vector<int32_t>(static_cast<size_t>(A)));
  auto i32 = [](int64_t v) { return static_cast<int32_t>(v); };
  for (int64_t b = 0; b < B; ++b) {
    const PackedItem& item = r.layout.items[b];
    int64_t row = item.begin;
    // As pack_inputs / unpack_outputs: patch (tt, hh, ww); features (C, pT, pH, pW) with C slowest
    // on the way in, "(pT pH pW C)" with C fastest on the way out.
    for (int64_t tt = 0; tt < Ts; ++tt)
      for (int64_t hh = 0; hh < Hs; ++hh)
        for (int64_t ww = 0; ww < Ws; ++ww, ++row) {
          r.noisy[row] = 1;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < pt; ++i)
              for (int64_t j = 0; j < ps; ++j)
                for (int64_t k = 0; k < ps; ++k) {
                  const int64_t src = ((c * T + tt * pt + i) * H + hh * ps + j) * W + ww * ps + k;
                  r.x[row * width + ((c * pt + i) * ps + j) * ps + k] = i32(src);
                  r.video_out[b][src] = i32(row * out_w + ((i * ps + j) * ps + k) * C + c);
                }
        }
    for (int64_t i = 0; i < La; ++i, ++row) {
      r.noisy[row] = 1;
      for (int64_t ch = 0; ch < Ca; ++ch) {
        r.x[row * width + ch] = i32(V + i * Ca + ch);
        r.audio_out[b][i * Ca + ch] = i32(row * out_w + ch);
      }
    }
    for (int64_t j = 0; j < item.text_tokens; ++j, ++row)
      for (int64_t ch = 0; ch < Ct; ++ch)
        r.x[row * width + ch] = i32(V + A + (b * text_rows + j) * Ct + ch);
    AVDIT_CHECK(row == r.layout.cu_seqlens[b + 1], "packing index row count");
  }
  return r;
}

}  // namespace avdit::models::magi2
