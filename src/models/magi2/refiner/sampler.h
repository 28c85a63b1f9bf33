// The refiner's sampling from a preview latent (Magi2InferenceEngine.evaluate_magi2_refiner_with_
// latent): trilinear upsampling to (2T - 1, H, W), re-noising with the ZeroSNR DDPM table, then N
// UniPC steps (the preview's FlowUniPC and schedule) with CFG, the conditional and the negative
// prompt as two batch-1 forwards (different lengths, different range lists). This is the entry
// `avdit generate` calls for MAGI-2's second stage.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "models/magi2/refiner/config.h"
#include "models/magi2/refiner/model.h"

namespace avdit::models::magi2::refiner {

// ZeroSNRDDPMDiscretization()(1000, do_append_zero=False, flip=True): the signal coefficient of
// DDPM timestep t (index t), float32 with the reference's operation order; table[999] = 0.
std::vector<float> zero_snr_table();

// F.interpolate(preview [1, C, T, h, w], size=(2T - 1, H, W), mode="trilinear",
// align_corners=True) in float32 on the host.
Tensor upsample_preview(const Tensor& preview, int64_t H, int64_t W);

// x * s + noise * (1 - s^2)^0.5, each product and the sum rounded to float32 (torch's ops).
Tensor renoise(const Tensor& x, const Tensor& noise, float s);

struct RefineInputs {
  Tensor preview_video;  // [1, C_v, T_p, h, w]: the preview's final latent
  Tensor preview_audio;  // [1, L_a, C_a]: used only with audio_noise_scale >= 0 (else no audio)
  Tensor text;           // [1, L_t, C_t]: the prompt's features (context)
  Tensor null_text;      // [1, L_n, C_t]: the negative prompt's (context_null)
  int64_t height = 0, width = 0;  // the refiner's latent grid (pixels / vae_stride)
  Tensor video_noise;             // [1, C_v, 2 T_p - 1, H, W] standard normal: the re-noise draw
  Tensor audio_noise;             // [1, L_a, C_a]: only with audio_noise_scale > 0
};

struct Refined {
  Tensor video;  // [1, C_v, 2 T_p - 1, H, W] F32 on the host
  Tensor audio;  // [1, L_a', C_a]: the refiner's audio (empty without audio; the reference
                 // decodes the preview's audio in any case)
};

// Runs the whole second stage on the model's context with the settings of `s` (config().sampler
// unless overridden). BadInput (exit 2) names a preview latent, text or noise of the wrong shape.
// progress(done, total, seconds) after each step when given.
Refined refine(const RefinerModel& model, const RefineInputs& in, const RefinerSamplerConfig& s,
               const std::function<void(int, int, double)>& progress = {});

}  // namespace avdit::models::magi2::refiner
