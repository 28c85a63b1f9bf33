// channels_to_space3d and space_to_channels_mean3d on the GPU (ops/space_shuffle3d.h): one thread
// per output element, or per 16-byte word where the gather moves runs of consecutive channels. The gather copies elements as bytes (any dtype, exact); the mean sums in
// fp32 in the CPU's flat order and divides once, so both match the CPU bit for bit.
#include <cstdint>

#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/space_shuffle3d.h"

namespace avdit::cuda {
namespace {

struct Shuffle {
  int64_t H, W, C;     // input extent
  int64_t Ho, Wo, Co;  // output extent
  int64_t ft, fs, so, sa, si, sj, div;
};

// E: an unsigned integer of the element's size (the values are moved, never read as numbers).
template <class E>
__global__ void channels_to_space_kernel(const E* x, E* y, Shuffle s, int64_t n) {
  for (int64_t e = first_of(); e < n; e += stride_of()) {
    const int64_t o = e % s.Co, v = e / s.Co;
    const int64_t w = v % s.Wo, h = (v / s.Wo) % s.Ho, t = v / (s.Wo * s.Ho);
    const int64_t a = t % s.ft, i = h % s.fs, j = w % s.fs;
    const int64_t src = ((t / s.ft) * s.H + h / s.fs) * s.W + w / s.fs;
    y[e] = x[src * s.C + (o * s.so + a * s.sa + i * s.si + j * s.sj) / s.div];
  }
}

__global__ void space_to_channels_mean_kernel(const void* x, Elt xt, void* y, Elt yt, int64_t H,
                                              int64_t W, int64_t C, int64_t Ho, int64_t Wo,
                                              int64_t Co, int64_t ft, int64_t fs, int64_t group,
                                              int64_t n) {
  const int64_t F = ft * fs * fs;
  for (int64_t e = first_of(); e < n; e += stride_of()) {
    const int64_t o = e % Co, v = e / Co;
    const int64_t w = v % Wo, h = (v / Wo) % Ho, t = v / (Wo * Ho);
    float sum = 0.0f;
    for (int64_t g = 0; g < group; ++g) {
      const int64_t flat = o * group + g, c = flat / F, r = flat % F;
      const int64_t a = r / (fs * fs), i = (r / fs) % fs, j = r % fs;
      sum += load_elt(x, xt, (((t * ft + a) * H + h * fs + i) * W + w * fs + j) * C + c);
    }
    store_elt(y, yt, e, sum / static_cast<float>(group));
  }
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void channels_to_space3d(CudaContext& c, const Tensor& x, const ChannelsToSpace& s, Tensor& y) {
  c.require_here(x, "channels_to_space3d x");
  c.require_here(y, "channels_to_space3d y");
  AVDIT_CHECK(x.ndim() == 4 && y.ndim() == 4 && s.ft > 0 && s.fs > 0 && s.div > 0,
              "channels_to_space3d: x {} y {}", x.shape_str(), y.shape_str());
  const int64_t T = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3), Co = s.out_channels;
  AVDIT_CHECK(
      y.size(0) == T * s.ft && y.size(1) == H * s.fs && y.size(2) == W * s.fs && y.size(3) == Co,
      "channels_to_space3d: output {} for x {}", y.shape_str(), x.shape_str());
  const int64_t last = ((Co - 1) * s.so + (s.ft - 1) * s.sa + (s.fs - 1) * (s.si + s.sj)) / s.div;
  AVDIT_CHECK(Co == 0 || last < C, "channels_to_space3d: channel {} of {} read", last, C);
  AVDIT_CHECK(x.dtype() == y.dtype(), "channels_to_space3d: dtypes differ");
  const int64_t n = y.numel();
  if (n == 0) return;
  const int64_t es = dtype_nbytes(x.dtype(), 1), V = 16 / es;  // elements in 16 bytes
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (s.div == 1 && s.so == 1 && 16 % es == 0 && Co % V == 0 && C % V == 0 && s.sa % V == 0 &&
      s.si % V == 0 && s.sj % V == 0 && aligned(x.raw()) && aligned(y.raw())) {
    // Runs of consecutive channels (the nearest upsampling, the time interleave): 16-byte words
    // as the elements, the index arithmetic once per word.
    const Shuffle w{H, W, C / V, H * s.fs, W * s.fs, Co / V, s.ft, s.fs, 1, s.sa / V, s.si / V, s.sj / V, 1};
    const int64_t nw = n / V;
    channels_to_space_kernel<<<grid_for(nw), kThreads, 0, c.stream()>>>(
        static_cast<const uint4*>(x.raw()), static_cast<uint4*>(device_ptr(y)), w, nw);
    AVDIT_CUDA_CHECK_LAUNCH();
    return;
  }
  const Shuffle sh{H, W, C, H * s.fs, W * s.fs, Co, s.ft, s.fs, s.so, s.sa, s.si, s.sj, s.div};
  const unsigned grid = grid_for(n);
  switch (es) {
    case 1:
      channels_to_space_kernel<<<grid, kThreads, 0, c.stream()>>>(
          static_cast<const uint8_t*>(x.raw()), static_cast<uint8_t*>(device_ptr(y)), sh, n);
      break;
    case 2:
      channels_to_space_kernel<<<grid, kThreads, 0, c.stream()>>>(
          static_cast<const uint16_t*>(x.raw()), static_cast<uint16_t*>(device_ptr(y)), sh, n);
      break;
    case 4:
      channels_to_space_kernel<<<grid, kThreads, 0, c.stream()>>>(
          static_cast<const uint32_t*>(x.raw()), static_cast<uint32_t*>(device_ptr(y)), sh, n);
      break;
    case 8:
      channels_to_space_kernel<<<grid, kThreads, 0, c.stream()>>>(
          static_cast<const uint64_t*>(x.raw()), static_cast<uint64_t*>(device_ptr(y)), sh, n);
      break;
    default:
      AVDIT_REQUIRE(false, "channels_to_space3d: dtype {} not supported on CUDA",
                    dtype_name(x.dtype()));
  }
  AVDIT_CUDA_CHECK_LAUNCH();
}

void space_to_channels_mean3d(CudaContext& c, const Tensor& x, const SpaceToChannelsMean& s,
                              Tensor& y) {
  c.require_here(x, "space_to_channels_mean3d x");
  c.require_here(y, "space_to_channels_mean3d y");
  AVDIT_CHECK(x.ndim() == 4 && y.ndim() == 4 && s.ft > 0 && s.fs > 0 && s.out_channels > 0,
              "space_to_channels_mean3d: x {} y {}", x.shape_str(), y.shape_str());
  const int64_t T = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3);
  const int64_t F = s.ft * s.fs * s.fs, Co = s.out_channels;
  AVDIT_CHECK(T % s.ft == 0 && H % s.fs == 0 && W % s.fs == 0 && (C * F) % Co == 0,
              "space_to_channels_mean3d: x {} with factors {}x{} into {} channels", x.shape_str(),
              s.ft, s.fs, Co);
  const int64_t To = T / s.ft, Ho = H / s.fs, Wo = W / s.fs, group = C * F / Co;
  AVDIT_CHECK(y.size(0) == To && y.size(1) == Ho && y.size(2) == Wo && y.size(3) == Co,
              "space_to_channels_mean3d: output {} for x {}", y.shape_str(), x.shape_str());
  const Elt xt = elt_of(x, "space_to_channels_mean3d x"),
            yt = elt_of(y, "space_to_channels_mean3d y");
  const int64_t n = y.numel();
  if (n == 0) return;
  space_to_channels_mean_kernel<<<grid_for(n), kThreads, 0, c.stream()>>>(
      x.raw(), xt, device_ptr(y), yt, H, W, C, Ho, Wo, Co, s.ft, s.fs, group, n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
