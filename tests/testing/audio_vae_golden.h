// The audio VAE goldens (../shared/golden/vae-sa-audio-tiny, vae-h3audio-tiny) for the decoder
// tests: where they are, the README's float32 bar, the error measure it is stated in, and a probe
// that keeps every observer point of a decode.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/observer.h"
#include "core/tensor.h"
#include "ops/context.h"

namespace avdit::testing {

inline const std::filesystem::path kSaAudioTiny =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "vae-sa-audio-tiny";
inline const std::filesystem::path kH3AudioTiny =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "vae-h3audio-tiny";

// Both READMEs: max|diff| <= 1e-4 max|ref| for a float32 re-implementation.
inline constexpr double kAudioVaeFp32Bar = 1e-4;

// max |got - want| / max |want|, over the same number of elements.
inline double audio_rel_err(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(DType::F64), w = want.to(DType::F64);
  EXPECT_EQ(g.numel(), w.numel());
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < std::min(g.numel(), w.numel()); ++i) {
    diff = std::max(diff, std::fabs(g.data<double>()[i] - w.data<double>()[i]));
    ref = std::max(ref, std::fabs(w.data<double>()[i]));
  }
  return ref > 0 ? diff / ref : diff;
}

class AudioCaptureProbe final : public Probe {
 public:
  bool wants(const Point&) const override { return true; }
  void on(ops::Context& ctx, const Point& p, Tensor& t) override {
    got[p.str()] = ctx.download(t).to(DType::F32).clone();
  }
  TensorMap got;
};

}  // namespace avdit::testing
