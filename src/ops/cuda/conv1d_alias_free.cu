// BigVGAN's anti-aliased SnakeBeta on the GPU (ops/conv1d_alias_free.h), fused as on the CPU: a
// block takes one (row, channel) and a tile of output samples, computes the high-rate samples the
// tile's low-pass reads (upsampled polyphase, activated) into shared memory, then decimates them;
// the upsampled signal never exists in global memory. The taps are summed in the CPU's order.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/context.h"
#include "ops/conv1d_alias_free.h"
#include "ops/cuda/common.cuh"
#include "ops/snake_beta.h"

namespace avdit::cuda {
namespace {

constexpr int64_t kTile = 256;                    // output samples per block
constexpr int64_t kSharedFloats = 48 * 1024 / 4;  // the default dynamic shared memory limit

struct AliasFree {
  int64_t C, L, tiles;
  int32_t r, Ku, Kd;
  int64_t pad, crop_left, pad_left, tile;
};

// Shared memory: the up filter [Ku], the down filter [Kd], then the tile's high-rate samples.
__global__ void alias_free_snake_kernel(const void* x, Elt xt, const void* up, Elt ut,
                                        const void* down, Elt dt, const void* alpha, Elt at,
                                        const void* beta, Elt bt, void* y, Elt yt, AliasFree p) {
  extern __shared__ float sh[];
  float* fu = sh;
  float* fd = sh + p.Ku;
  float* h = fd + p.Kd;
  const int64_t row = blockIdx.x / p.tiles, j0 = (blockIdx.x % p.tiles) * p.tile;
  const int64_t c = row % p.C, L = p.L, r = p.r, H = L * r, Lp = L + 2 * p.pad;
  const int64_t nj = std::min(p.tile, L - j0), nh = (nj - 1) * r + p.Kd;
  for (int i = threadIdx.x; i < p.Ku; i += blockDim.x) fu[i] = load_elt(up, ut, i);
  for (int i = threadIdx.x; i < p.Kd; i += blockDim.x) fd[i] = load_elt(down, dt, i);
  __syncthreads();
  const float a = expf(load_elt(alpha, at, c));
  const float inv = 1.0f / (expf(load_elt(beta, bt, c)) + ::avdit::ops::kSnakeEps);
  const int64_t x0 = row * L;
  // h[q] = the replicate-padded high-rate sample j0 * r + q: snake(u[t]) at t clamped to [0, H).
  for (int64_t qh = threadIdx.x; qh < nh; qh += blockDim.x) {
    const int64_t t = std::min(std::max<int64_t>(j0 * r + qh - p.pad_left, 0), H - 1);
    const int64_t q = t + p.crop_left;  // position in the uncropped transposed-conv output
    const int64_t skip = std::max<int64_t>(0, q / r - (Lp - 1));  // taps past the right end
    float acc = 0.0f;
    for (int64_t i = q / r - skip, k = q % r + skip * r; i >= 0 && k < p.Ku; --i, k += r)
      acc += load_elt(x, xt, x0 + std::min(std::max<int64_t>(i - p.pad, 0), L - 1)) * fu[k];
    const float u = static_cast<float>(r) * acc;
    const float s = sinf(u * a);
    h[qh] = u + inv * (s * s);
  }
  __syncthreads();
  for (int64_t jj = threadIdx.x; jj < nj; jj += blockDim.x) {
    float acc = 0.0f;
    const float* hj = h + jj * r;
    for (int k = 0; k < p.Kd; ++k) acc += hj[k] * fd[k];
    store_elt(y, yt, x0 + j0 + jj, acc);
  }
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void conv1d_alias_free_snake(CudaContext& c, const Tensor& x, const Tensor& up, const Tensor& down,
                             const Tensor& alpha, const Tensor& beta, int64_t ratio, Tensor& y) {
  for (const auto& [t, what] : {std::pair<const Tensor*, const char*>{&x, "x"},
                                {&up, "up filter"},
                                {&down, "down filter"},
                                {&alpha, "alpha"},
                                {&beta, "beta"},
                                {&y, "y"}})
    c.require_here(*t, what);
  AVDIT_CHECK(x.ndim() == 3 && y.shape() == x.shape() && alpha.numel() == x.size(1) &&
                  beta.numel() == x.size(1),
              "conv1d_alias_free_snake: x {} y {} with alpha {} and beta {}", x.shape_str(),
              y.shape_str(), alpha.shape_str(), beta.shape_str());
  AVDIT_CHECK(ratio >= 1 && up.numel() >= ratio && down.numel() >= 1,
              "conv1d_alias_free_snake: filters {} and {} for ratio {}", up.shape_str(),
              down.shape_str(), ratio);
  const Elt xt = elt_of(x, "conv1d_alias_free_snake x"),
            ut = elt_of(up, "conv1d_alias_free_snake up filter"),
            dt = elt_of(down, "conv1d_alias_free_snake down filter"),
            at = elt_of(alpha, "conv1d_alias_free_snake alpha"),
            bt = elt_of(beta, "conv1d_alias_free_snake beta"),
            yt = elt_of(y, "conv1d_alias_free_snake y");
  const int64_t C = x.size(1), L = x.size(2), rows = x.size(0) * C;
  if (rows == 0 || L == 0) return;
  const int64_t Ku = up.numel(), Kd = down.numel();
  // The tile shrinks for long filters or high ratios so that its samples fit in shared memory.
  const int64_t room = kSharedFloats - Ku - Kd - (Kd - 1);
  AVDIT_REQUIRE(room >= ratio,
                "conv1d_alias_free_snake: filters of {} and {} taps at ratio {} "
                "do not fit the CUDA kernel's shared memory",
                Ku, Kd, ratio);
  const int64_t tile = std::min(kTile, room / ratio);
  AliasFree p;
  p.C = C;
  p.L = L;
  p.tiles = (L + tile - 1) / tile;
  p.r = static_cast<int32_t>(ratio);
  p.Ku = static_cast<int32_t>(Ku);
  p.Kd = static_cast<int32_t>(Kd);
  p.pad = Ku / ratio - 1;
  p.crop_left = p.pad * ratio + (Ku - ratio) / 2;
  p.pad_left = Kd / 2 - (Kd % 2 == 0 ? 1 : 0);
  p.tile = tile;
  const int64_t blocks = rows * p.tiles;
  AVDIT_REQUIRE(blocks <= 0x7fffffff, "conv1d_alias_free_snake: x {} too long for one launch",
                x.shape_str());
  const size_t shared = static_cast<size_t>(Ku + Kd + (tile - 1) * ratio + Kd) * sizeof(float);
  alias_free_snake_kernel<<<static_cast<unsigned>(blocks), kThreads, shared, c.stream()>>>(
      x.raw(), xt, up.raw(), ut, down.raw(), dt, alpha.raw(), at, beta.raw(), bt, device_ptr(y), yt,
      p);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
