// The portable fp32 attention kernel (attention_portable.cu): any float dtype, any head dim up to
// 256, sinks and gate; the parity path and the fallback where cuDNN does not take a shape.
#pragma once

#include "backend/cuda/device.h"

namespace avdit::cuda {

inline constexpr int64_t kPortableMaxHeadDim = 256;  // the most head dims the kernel holds

// As ops::attention: q [S, Hq, D], k, v [S, Hkv, D]; cu_seqlens I32 [n + 1] on the device
// (undefined: one segment); sinks F32 [Hq]; gate [S, Hq]; y [S, Hq, D] preallocated. causal: query
// s sees the keys of its segment up to s.
void portable_attention(Device& dev, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                        const Tensor& cu_seqlens, const Tensor* sinks, const Tensor* gate,
                        Tensor& y, bool causal = false);

}  // namespace avdit::cuda
