// AudioWeights: the checks and the weight-norm fold (see audio_weights.h).
#include "models/vae/audio_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "core/error.h"
#include "io/safetensors.h"
#include "ops/context.h"

namespace avdit::models::vae {

bool AudioWeights::contains(const std::string& name) const {
  return ckpt_.contains(prefix_ + name);
}

Shape AudioWeights::shape_of(const std::string& name) const {
  const std::string full = prefix_ + name;
  AVDIT_REQUIRE(ckpt_.contains(full), "{} checkpoint {}: missing tensor '{}'", what_,
                ckpt_.source().string(), full);
  return ckpt_.info(full).shape;
}

Tensor AudioWeights::host(const std::string& name, const Shape& shape) const {
  const std::string full = prefix_ + name;
  AVDIT_REQUIRE(ckpt_.contains(full), "{} checkpoint {}: missing tensor '{}' (expected [{}])",
                what_, ckpt_.source().string(), full, fmt::join(shape, ", "));
  const TensorInfo& info = ckpt_.info(full);
  AVDIT_REQUIRE(info.shape == shape, "{} checkpoint {}: tensor '{}' has shape [{}], expected [{}]",
                what_, ckpt_.source().string(), full, fmt::join(info.shape, ", "),
                fmt::join(shape, ", "));
  AVDIT_REQUIRE(info.dtype == DType::F32 || info.dtype == DType::BF16 || info.dtype == DType::F16,
                "{} checkpoint {}: tensor '{}' has dtype {}, expected F32 (or BF16/F16)", what_,
                ckpt_.source().string(), full, dtype_name(info.dtype));
  return ckpt_.get(full).to(DType::F32);
}

Tensor AudioWeights::get(const std::string& name, const Shape& shape) const {
  return ctx_.upload(host(name, shape));
}

Tensor AudioWeights::weight_norm(const std::string& g_name, const std::string& v_name,
                                 const Shape& v_shape) const {
  const Tensor g = host(g_name, {v_shape[0], 1, 1});
  const Tensor v = host(v_name, v_shape);
  Tensor w = Tensor::empty(v_shape, DType::F32);
  const int64_t rows = v_shape[0], per = v.numel() / rows;
  for (int64_t r = 0; r < rows; ++r) {
    const float* pv = v.f32() + r * per;
    double ss = 0;
    for (int64_t i = 0; i < per; ++i) ss += static_cast<double>(pv[i]) * pv[i];
    // torch: v * (g / norm), in float32.
    const float scale = g.f32()[r] / static_cast<float>(std::sqrt(ss));
    for (int64_t i = 0; i < per; ++i) w.f32()[r * per + i] = pv[i] * scale;
  }
  return ctx_.upload(w);
}

}  // namespace avdit::models::vae
