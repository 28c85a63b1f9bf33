// Shared by the CPU and GPU tests of the H3 video VAE decoder: where its golden lives, the README's
// float32 bar, the golden's layouts turned into the decoder's token layout, and a probe that keeps
// the named points of one tile decode.
#pragma once

#include <filesystem>
#include <string>

#include "core/observer.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "ops/context.h"

namespace avdit::testing {

inline const std::filesystem::path kH3VideoTiny =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "vae-h3video-tiny";

// The README's suggested acceptance for a float32 re-implementation: max|diff| <= 1e-4 max|ref|.
inline constexpr double kH3VideoFp32Bar = 1e-4;

// [1, Z, T, h, w] (or [Z, T, h, w]) -> [T h w, Z]: the decoder's token rows.
inline Tensor to_tokens(const Tensor& x) {
  const Tensor f = x.to_f32();
  const int64_t Z = f.size(-4), cells = f.numel() / Z;
  Tensor out = Tensor::empty({cells, Z}, DType::F32);
  for (int64_t z = 0; z < Z; ++z)
    for (int64_t n = 0; n < cells; ++n) out.f32()[n * Z + z] = f.f32()[z * cells + n];
  return out;
}

// Keeps the points of tile decode `part` (and those without a part) by name.
class TileProbe final : public Probe {
 public:
  explicit TileProbe(int64_t part) : part_(part) {}
  bool wants(const Point& p) const override { return p.part < 0 || p.part == part_; }
  void on(ops::Context& ctx, const Point& p, Tensor& t) override {
    got[p.str()] = ctx.download(t).to(DType::F32).clone();
  }
  TensorMap got;

 private:
  int64_t part_;
};

}  // namespace avdit::testing
