#include "pipeline/clip_frames.h"

#include "core/error.h"
#include "models/vae/h3video/decoder.h"

namespace avdit::pipeline {

Tensor writer_frames(models::vae::Family family, const Tensor& video) {
  const Tensor unit = family == models::vae::Family::H3Video
                          ? models::vae::h3video::imagenet_to_unit(video)
                          : Tensor();
  const Tensor& v = unit.defined() ? unit : video;
  AVDIT_CHECK(v.ndim() == 4 && v.size(0) == 3, "decode: video {} is not [3, T, H, W]", v.shape_str());
  const int64_t T = v.size(1), HW = v.size(2) * v.size(3);
  Tensor out = Tensor::empty({T, 3, v.size(2), v.size(3)}, DType::F32);
  const float* src = v.f32();
  float* dst = out.f32();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < HW; ++i) {
        const float x = src[(c * T + t) * HW + i];
        dst[(t * 3 + c) * HW + i] = unit.defined() ? 2.f * x - 1.f : x;
      }
  return out;
}

}  // namespace avdit::pipeline
