// The audio VAE goldens (../shared/golden/vae-sa-audio-tiny, vae-h3audio-tiny) for the decoder
// tests: where they are, the README's float32 bar, the error measure it is stated in, and a probe
// that keeps every observer point of a decode.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/observer.h"
#include "core/tensor.h"
#include "models/vae/decoder_factory.h"
#include "ops/context.h"
#include "testing/golden_compare.h"

namespace avdit::testing {

inline const std::filesystem::path kSaAudioTiny =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "vae-sa-audio-tiny";
inline const std::filesystem::path kH3AudioTiny =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "vae-h3audio-tiny";

// Both READMEs: max|diff| <= 1e-4 max|ref| for a float32 re-implementation.
inline constexpr double kAudioVaeFp32Bar = 1e-4;

inline double audio_rel_err(const Tensor& got, const Tensor& want) {
  return golden_rel_err(got, want);
}

using AudioCaptureProbe = CapturePoints;

// The message with which the decoder of `dir` refuses `latents` on the CPU ("accepted" if it
// does not).
inline std::string decode_rejection(const std::filesystem::path& dir, const Tensor& latents) {
  ops::CpuContext ctx;
  try {
    models::vae::open_decoder(ctx, dir)->decode(latents);
  } catch (const BadInput& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace avdit::testing
