// Moves between channels and space-time on channel-last video [T, H, W, C]: the video VAEs'
// nearest upsampling, DupUp3D shortcut and time_conv frame interleave (channels_to_space3d, an
// exact gather), and the AvgDown3D shortcut of the encoder (space_to_channels_mean3d).
#pragma once

#include <cstdint>

#include "ops/dispatch.h"

namespace avdit::ops {

// Output voxel (t*ft + a, h*fs + i, w*fs + j) channel o reads input channel
// (o*so + a*sa + i*si + j*sj) / div of voxel (t, h, w).
struct ChannelsToSpace {
  int64_t ft = 1, fs = 1;  // time and space factors
  int64_t out_channels = 0;
  int64_t so = 1, sa = 0, si = 0, sj = 0, div = 1;
};

// Output channel o of voxel (t', h', w') is the mean of the g = C*ft*fs*fs / out_channels values
// at flat indices [o*g, (o+1)*g), flat = c*ft*fs*fs + a*fs*fs + i*fs + j naming input
// x[t'*ft + a, h'*fs + i, w'*fs + j, c] (AvgDown3D's order).
struct SpaceToChannelsMean {
  int64_t ft = 1, fs = 1;
  int64_t out_channels = 0;
};

namespace cpu {
void channels_to_space3d(const Tensor& x, const ChannelsToSpace& s, Tensor& y);
void space_to_channels_mean3d(const Tensor& x, const SpaceToChannelsMean& s, Tensor& y);
}  // namespace cpu
namespace cuda {
void channels_to_space3d(CudaContext& c, const Tensor& x, const ChannelsToSpace& s, Tensor& y);
void space_to_channels_mean3d(CudaContext& c, const Tensor& x, const SpaceToChannelsMean& s,
                              Tensor& y);
}  // namespace cuda

// x [T, H, W, C] -> [T*ft, H*fs, W*fs, out_channels] (x's dtype; every value copied exactly).
inline Tensor channels_to_space3d(Context& ctx, const Tensor& x, const ChannelsToSpace& s) {
  Tensor y =
      ctx.empty({x.size(0) * s.ft, x.size(1) * s.fs, x.size(2) * s.fs, s.out_channels}, x.dtype());
  AVDIT_OP(ctx, channels_to_space3d, x, s, y);
  return y;
}
// The nearest (and nearest-exact) x2 spatial upsampling of every frame.
inline Tensor upsample_nearest2x(Context& ctx, const Tensor& x) {
  return channels_to_space3d(ctx, x, {1, 2, x.size(3), 1, 0, 0, 0, 1});
}

// x [T, H, W, C] (T, H, W divisible by ft, fs, fs) -> [T/ft, H/fs, W/fs, out_channels], the means
// summed in fp32 in flat order.
inline Tensor space_to_channels_mean3d(Context& ctx, const Tensor& x, const SpaceToChannelsMean& s,
                                       DType out = DType::F32) {
  Tensor y = ctx.empty({x.size(0) / s.ft, x.size(1) / s.fs, x.size(2) / s.fs, s.out_channels}, out);
  AVDIT_OP(ctx, space_to_channels_mean3d, x, s, y);
  return y;
}

}  // namespace avdit::ops
