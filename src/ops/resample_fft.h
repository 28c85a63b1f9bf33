// FFT resampling of a periodic signal to another length (scipy.signal.resample): the spectrum is
// truncated (or zero-padded) to the new length and transformed back, scaled by n_out / n. MAGI-2
// stretches the Oobleck decoder's 51,200 samples per second of video onto 44.1 kHz with it.
// The transforms run in float64; the result is rounded to the output's dtype.
#pragma once

#include <cstdint>

#include <fmt/format.h>

#include "core/error.h"
#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void resample_fft(const Tensor& x, Tensor& y);
}  // namespace cpu
namespace cuda {
void resample_fft(CudaContext& c, const Tensor& x, Tensor& y);
}  // namespace cuda

// x: [rows, n] -> [rows, n_out], each row resampled independently.
inline Tensor resample_fft(Context& ctx, const Tensor& x, int64_t n_out) {
  AVDIT_CHECK(x.ndim() == 2 && x.size(1) >= 1 && n_out >= 1,
              "resample_fft: x {} to {} samples (expected [rows, n >= 1])", x.shape_str(), n_out);
  Tensor y = ctx.empty({x.size(0), n_out}, x.dtype());
  AVDIT_OP(ctx, resample_fft, x, y);
  return y;
}

}  // namespace avdit::ops
