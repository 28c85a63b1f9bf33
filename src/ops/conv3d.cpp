// The host-side repack of PyTorch convolution weights into conv3d's channel-last layout.
#include "ops/conv3d.h"

#include "core/error.h"

namespace avdit::ops {

Tensor conv3d_weight(const Tensor& torch_weight) {
  AVDIT_CHECK(torch_weight.device() == Device::CPU,
              "conv3d_weight: the weight must be on the host");
  const Tensor w = torch_weight.to_f32();
  AVDIT_CHECK(w.ndim() == 5 || w.ndim() == 4, "conv3d_weight: expected a 4-D or 5-D weight, got {}",
              w.shape_str());
  const int64_t co = w.size(0), ci = w.size(1), kt = w.ndim() == 5 ? w.size(2) : 1, kh = w.size(-2),
                kw = w.size(-1), taps = kt * kh * kw;
  Tensor out = Tensor::empty({co, kt, kh, kw, ci}, DType::F32);
  const float* src = w.f32();
  float* dst = out.f32();
  // src[o, c, tap] -> dst[o, tap, c]
  for (int64_t o = 0; o < co; ++o)
    for (int64_t c = 0; c < ci; ++c)
      for (int64_t t = 0; t < taps; ++t)
        dst[(o * taps + t) * ci + c] = src[(o * ci + c) * taps + t];
  return out;
}

}  // namespace avdit::ops
