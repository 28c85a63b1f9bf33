// Classifier-free guidance and the MAGI-2 reference's optional guidance tricks, float32 element-wise.
#include "sample/cfg.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "sample/elementwise.h"

namespace avdit::sample {

void cfg_combine(std::span<const float> cond, std::span<const float> uncond, float scale, std::span<float> out) {
  AVDIT_REQUIRE(cond.size() == uncond.size() && out.size() == cond.size(),
                "CFG: cond has {} elements, uncond {} and the output {}; expected equal", cond.size(),
                uncond.size(), out.size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = elem::cfg(cond[k], uncond[k], scale);
}

Tensor cfg_combine(const Tensor& cond, const Tensor& uncond, float scale) {
  AVDIT_REQUIRE(cond.shape() == uncond.shape(), "CFG: cond shape {} differs from uncond shape {}",
                cond.shape_str(), uncond.shape_str());
  const Tensor c = cond.to_f32(), u = uncond.to_f32();
  Tensor out = Tensor::empty(cond.shape(), DType::F32);
  const auto n = static_cast<size_t>(out.numel());
  cfg_combine({c.f32(), n}, {u.f32(), n}, scale, {out.f32(), n});
  return out;
}

std::vector<float> magi2_video_scales(const Magi2Guidance& g, int64_t latent_frames, int64_t timestep) {
  std::vector<float> s(static_cast<size_t>(latent_frames), g.video_scale);
  if (g.use_cfg_trick)
    for (int64_t f = 0; f < std::min<int64_t>(g.cfg_trick_start_frame, latent_frames); ++f)
      s[f] = std::min(g.cfg_trick_value, g.video_scale);
  if (g.use_dynamic_cfg && timestep < g.dynamic_cfg_start_t)
    for (float& v : s)
      if (v > g.dynamic_cfg_cutoff_value) v = g.dynamic_cfg_cutoff_value;
  return s;
}

namespace {

inline float sign(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); }

// _get_skimming_mask for one element.
inline bool skim_mask(float x, float cond, float uncond, float s) {
  const float denoised = x - ((x - uncond) + s * ((x - cond) - (x - uncond)));
  const bool a = sign(cond - uncond) == sign(cond);
  const bool b = sign(cond) == sign(cond * s - uncond * (s - 1.0f));
  const bool c = sign(denoised) == sign(denoised - x);
  return a && b && c;
}

// Layout of one modality for per-element scales and per-group statistics:
// element (o, m, i) at (o * mid + m) * inner + i; scale index = scale_of(o, m, i).
struct Layout {
  int64_t outer, mid, inner;
};

// Guided velocity with per-element scale scale_at(k); applies skimming and rescale as configured.
template <class ScaleAt>
Tensor guided(const Tensor& cond_t, const Tensor& uncond_t, const Tensor& latent_t, const Magi2Guidance& g,
              ScaleAt scale_at, Layout rescale_groups) {
  AVDIT_REQUIRE(cond_t.shape() == uncond_t.shape(), "MAGI-2 CFG: cond shape {} differs from uncond shape {}",
                cond_t.shape_str(), uncond_t.shape_str());
  const Tensor cond = cond_t.to_f32();
  Tensor uncond = uncond_t.to_f32().clone();  // skimming rewrites it
  const int64_t n = cond.numel();
  const float* c = cond.f32();
  float* u = uncond.f32();

  if (g.use_skimmed_cfg_linear) {
    AVDIT_REQUIRE(latent_t.defined() && latent_t.shape() == cond_t.shape(),
                  "MAGI-2 skimmed CFG: expected the latent with shape {}", cond_t.shape_str());
    const Tensor lat = latent_t.to_f32();
    const float* x = lat.f32();
    bool any_uncond = false, any_valid = false;
    for (int64_t k = 0; k < n; ++k) any_uncond |= u[k] != 0.0f;
    for (int64_t k = 0; k < n; ++k) any_valid |= scale_at(k) > 1.0f;
    if (any_uncond && any_valid) {
      for (int pass = 0; pass < 2; ++pass) {
        for (int64_t k = 0; k < n; ++k) {
          const float s = scale_at(k);
          if (!(s > 1.0f)) continue;
          const float w = (g.skimmed_cfg_scale - 1.0f) / (s - 1.0f);
          const float target = c[k] * (1.0f - w) + u[k] * w;
          // pass 0: mask(x, cond, uncond); pass 1: mask(x, uncond, cond) with the updated uncond.
          const bool m = pass == 0 ? skim_mask(x[k], c[k], u[k], s) : skim_mask(x[k], u[k], c[k], s);
          if (m) u[k] = target;
        }
      }
    }
  }

  Tensor out = Tensor::empty(cond.shape(), DType::F32);
  float* o = out.f32();
  for (int64_t k = 0; k < n; ++k) o[k] = elem::cfg(c[k], u[k], scale_at(k));

  if (g.cfg_rescale > 0.0f && n > 0) {
    // Plain copies, not a structured binding: clang 14 (the fuzz build) cannot capture those.
    const int64_t outer = rescale_groups.outer, mid = rescale_groups.mid, inner = rescale_groups.inner;
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t i = 0; i < inner; ++i) {
        auto std_of = [&](const float* p) {
          double sum = 0, sq = 0;
          for (int64_t m = 0; m < mid; ++m) sum += p[(a * mid + m) * inner + i];
          const double mean = sum / static_cast<double>(mid);
          for (int64_t m = 0; m < mid; ++m) {
            const double d = p[(a * mid + m) * inner + i] - mean;
            sq += d * d;
          }
          return static_cast<float>(std::sqrt(sq / static_cast<double>(mid)));
        };
        const float pos_std = std_of(c);
        const float cfg_std = std::max(std_of(o), 1e-6f);
        const float factor = g.cfg_rescale * (pos_std / cfg_std) + (1.0f - g.cfg_rescale);
        for (int64_t m = 0; m < mid; ++m) o[(a * mid + m) * inner + i] *= factor;
      }
    }
  }
  return out;
}

}  // namespace

Tensor magi2_cfg_video(const Tensor& cond, const Tensor& uncond, const Tensor& latent, const Magi2Guidance& g,
                       int64_t timestep) {
  AVDIT_REQUIRE(cond.ndim() == 5, "MAGI-2 video CFG: expected [B, C, T, H, W], got {}", cond.shape_str());
  const int64_t B = cond.size(0), C = cond.size(1), T = cond.size(2), HW = cond.size(3) * cond.size(4);
  const std::vector<float> scales = magi2_video_scales(g, T, timestep);
  auto scale_at = [&](int64_t k) { return scales[(k / HW) % T]; };
  return guided(cond, uncond, latent, g, scale_at, Layout{B * C, T * HW, 1});
}

Tensor magi2_cfg_audio(const Tensor& cond, const Tensor& uncond, const Tensor& latent, const Magi2Guidance& g) {
  AVDIT_REQUIRE(cond.ndim() == 3, "MAGI-2 audio CFG: expected [B, L, C], got {}", cond.shape_str());
  const float s = g.audio_scale;
  auto scale_at = [s](int64_t) { return s; };
  return guided(cond, uncond, latent, g, scale_at, Layout{cond.size(0), cond.size(1), cond.size(2)});
}

}  // namespace avdit::sample
