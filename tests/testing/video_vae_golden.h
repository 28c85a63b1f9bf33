// Shared by the Wan2.2 VAE and TurboVAED tests: the goldens' folders and bar, the layout change
// from the goldens' [1, C, T, H, W] to the decoders' channel-last points, and a probe that keeps
// every named point.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "core/observer.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "ops/context.h"
#include "testing/golden_compare.h"

namespace avdit::testing {

inline std::filesystem::path video_vae_golden(const char* name) {
  return std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / name;
}
// A golden's folder with its inputs and outputs, read once per process.
struct VideoVaeGolden {
  std::filesystem::path dir;
  TensorMap inputs, outputs;
};
inline const VideoVaeGolden& video_vae_fixture(const std::string& name) {
  static std::map<std::string, VideoVaeGolden> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    const auto d = video_vae_golden(name.c_str());
    it = cache
             .emplace(name, VideoVaeGolden{d, read_all(d / "inputs.safetensors"),
                                           read_all(d / "outputs.safetensors")})
             .first;
  }
  return it->second;
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

using KeepPoints = CapturePoints;

}  // namespace avdit::testing
