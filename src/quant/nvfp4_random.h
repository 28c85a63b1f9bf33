// Random NVFP4 expert stacks made directly in the packed layout (quant/nvfp4.h), without a bf16
// original: for full-width benchmarks whose bf16 experts would not fit the device (MAGI-2's routed
// experts are 217 GB in bf16, 61 GB packed), the same bytes on the CPU and the GPU.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "quant/nvfp4.h"

namespace avdit::quant {

// A stack [G, K, N] (K a multiple of 16) on the host: every e2m1 code uniform over its 16 values
// (byte i of the values = byte i % 8 of splitmix64(seed + i / 8), a function of (seed, i) only),
// every block scale 1.0 (e4m3 0x38), every global scale S = rms / std where rms = 2.9262 is the
// root mean square of a uniform e2m1 code: decoded weights have mean 0 and standard deviation
// `std`. BadInput for a shape that is not [G, K, N] with K % 16 == 0, or std <= 0.
Nvfp4Matrix random_nvfp4(const Shape& shape, uint64_t seed, float std);

}  // namespace avdit::quant
