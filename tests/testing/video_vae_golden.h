// Shared by the Wan2.2 VAE and TurboVAED tests: the goldens' folders and bar, the layout change
// from the goldens' [1, C, T, H, W] to the decoders' channel-last points, and a probe that keeps
// every named point.
#pragma once

#include <filesystem>
#include <string>

#include "core/observer.h"
#include "core/tensor.h"
#include "ops/context.h"

namespace avdit::testing {

inline std::filesystem::path video_vae_golden(const char* name) {
  return std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / name;
}
// The READMEs' suggested acceptance for float32: max |diff| <= 1e-4 max |ref|.
inline constexpr double kVideoVaeFp32Bar = 1e-4;

// [1, C, T, H, W] -> [T, H, W, C] (F32).
inline Tensor to_channel_last(const Tensor& x) {
  const Tensor f = x.to_f32();
  const int64_t C = x.size(1), n = x.numel() / C;
  Tensor y = Tensor::empty({x.size(2), x.size(3), x.size(4), C}, DType::F32);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < n; ++i) y.f32()[i * C + c] = f.f32()[c * n + i];
  return y;
}

class KeepPoints final : public Probe {
 public:
  bool wants(const Point&) const override { return true; }
  void on(ops::Context& ctx, const Point& p, Tensor& t) override {
    got[p.str()] = ctx.download(t).to(DType::F32).clone();
  }
  TensorMap got;
};

}  // namespace avdit::testing
