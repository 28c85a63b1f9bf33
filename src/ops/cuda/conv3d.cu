// conv3d on the GPU (ops/conv3d.h). BF16/F16 goes to cuDNN when it takes the shape
// (conv3d_cudnn.cpp); the rest runs as the CPU does it: im2col of a block of output
// voxels into [voxels, kt*kh*kw*Cin] rows of a stream-ordered workspace (bounded, so any clip
// fits), then one cuBLASLt GEMM (fp32 accumulation) per block against the [Cout, K] weight; the
// bias is added in fp32 and the sum rounded once to y's dtype. A 1x1x1 convolution multiplies the
// voxel rows as they are.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/context.h"
#include "ops/conv3d.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/conv3d_cudnn.h"
#include "ops/rows.h"

namespace avdit::cuda {
namespace {

// The im2col rows and the fp32 GEMM output of one block stay under this.
constexpr int64_t kWorkspaceBytes = int64_t{256} << 20;
constexpr int64_t kMinBlock = 64;
// Indices inside one block are int32 (the workspace bound keeps them far below this).
constexpr int64_t kMaxBlockElements = int64_t{1} << 30;

struct Geom {
  int64_t T, H, W;     // input extent
  int64_t Ho, Wo;      // output extent (voxel v = (to * Ho + ho) * Wo + wo)
  int32_t kh, kw;      // kernel extent in space (kt follows from the tap count)
  int64_t st, sh, sw;  // strides
  int64_t pad_front, pad_top, pad_left;
  bool replicate;  // TimePad::Replicate
};

// The input voxel that tap `tap` of output voxel v reads, or -1 where it reads a zero.
__device__ __forceinline__ int64_t source_voxel(const Geom& g, int64_t v, int32_t tap) {
  const int64_t wo = v % g.Wo, ho = (v / g.Wo) % g.Ho, to = v / (g.Wo * g.Ho);
  const int32_t j = tap % g.kw, i = (tap / g.kw) % g.kh, a = tap / (g.kw * g.kh);
  int64_t t = to * g.st + a - g.pad_front;
  if (t < 0 || t >= g.T) {
    if (!g.replicate || g.T == 0) return -1;
    t = t < 0 ? 0 : g.T - 1;
  }
  const int64_t h = ho * g.sh + i - g.pad_top, w = wo * g.sw + j - g.pad_left;
  if (h < 0 || h >= g.H || w < 0 || w >= g.W) return -1;
  return (t * g.H + h) * g.W + w;
}

// col[r, tap * Ci + ci] = x[source of voxel v0 + r, tap][ci], converted to col's dtype.
__global__ void im2col_kernel(const void* x, Elt xt, void* col, Elt ct, Geom g, int64_t v0,
                              int32_t Ci, int32_t K, int32_t total) {
  for (int32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    const int32_t r = e / K, kk = e - r * K, tap = kk / Ci, ci = kk - tap * Ci;
    const int64_t src = source_voxel(g, v0 + r, tap);
    store_elt(col, ct, e, src < 0 ? 0.0f : load_elt(x, xt, src * Ci + ci));
  }
}

// The same in 16-byte words, when x already has col's dtype and a voxel's channels are whole words
// (cw words): one index decomposition per 4 F32 or 8 BF16 channels instead of per channel.
__global__ void im2col_words_kernel(const uint4* x, uint4* col, Geom g, int64_t v0, int32_t cw,
                                    int32_t row_words, int32_t total) {
  for (int32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    const int32_t r = e / row_words, kk = e - r * row_words, tap = kk / cw, c = kk - tap * cw;
    const int64_t src = source_voxel(g, v0 + r, tap);
    col[e] = src < 0 ? make_uint4(0, 0, 0, 0) : x[src * cw + c];
  }
}

// y[y0 + i] = acc[i] + bias[i % N], rounded once to y's dtype (acc: the block's fp32 GEMM output).
__global__ void bias_store_kernel(const float* acc, const float* bias, void* y, Elt yt, int64_t y0,
                                  int32_t N, int32_t total) {
  for (int32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    const float v = bias ? acc[e] + bias[e % N] : acc[e];
    store_elt(y, yt, y0 + e, v);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;
namespace {

// Checks the operands, then runs cuDNN (when try_cudnn and it takes them) or im2col + cuBLASLt.
void run(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
         const Conv3dGeometry& g, Tensor& y, bool try_cudnn) {
  c.require_here(x, "conv3d x");
  c.require_here(w, "conv3d weight");
  c.require_here(y, "conv3d y");
  if (bias) c.require_here(*bias, "conv3d bias");
  AVDIT_CHECK(x.ndim() == 4 && w.ndim() == 5 && y.ndim() == 4,
              "conv3d: x {} w {} y {} (expected [T, H, W, Cin], [Cout, kt, kh, kw, Cin])",
              x.shape_str(), w.shape_str(), y.shape_str());
  const int64_t T = x.size(0), H = x.size(1), W = x.size(2), Ci = x.size(3);
  const int64_t Co = w.size(0), kt = w.size(1), kh = w.size(2), kw = w.size(3);
  AVDIT_CHECK(w.size(4) == Ci, "conv3d: weight {} for {} input channels", w.shape_str(), Ci);
  AVDIT_CHECK(g.stride_t > 0 && g.stride_h > 0 && g.stride_w > 0, "conv3d: strides must be > 0");
  const int64_t To = conv_out_size(T, g.pad_front, g.pad_back, kt, g.stride_t),
                Ho = conv_out_size(H, g.pad_top, g.pad_bottom, kh, g.stride_h),
                Wo = conv_out_size(W, g.pad_left, g.pad_right, kw, g.stride_w);
  AVDIT_CHECK(y.size(0) == To && y.size(1) == Ho && y.size(2) == Wo && y.size(3) == Co,
              "conv3d: output {} for x {} w {}", y.shape_str(), x.shape_str(), w.shape_str());
  if (bias)
    AVDIT_CHECK(bias->numel() == Co, "conv3d: bias {} for {} outputs", bias->shape_str(), Co);
  const Elt xt = elt_of(x, "conv3d x"), yt = elt_of(y, "conv3d y");
  elt_of(w, "conv3d weight");
  if (bias) elt_of(*bias, "conv3d bias");
  const int64_t taps = kt * kh * kw, K = taps * Ci, voxels = To * Ho * Wo;
  if (voxels == 0 || Co == 0) return;
  AVDIT_REQUIRE(Ci > 0, "conv3d: x {} has no channels", x.shape_str());
  if (try_cudnn && conv3d_cudnn(c, x, w, bias, g, y)) return;

  // cuBLASLt multiplies equal input types: x and w as they are when they agree, else both in F32
  // (exact widening). The im2col rows are written in that type whatever x's is.
  const DType in = x.dtype() == w.dtype() ? x.dtype() : DType::F32;
  const Tensor wk = ops::cast(c, w, in);
  const Tensor b32 = bias ? ops::cast(c, *bias, DType::F32) : Tensor();
  const bool pointwise = taps == 1 && g.stride_t == 1 && g.stride_h == 1 && g.stride_w == 1 &&
                         g.pad_front == 0 && g.pad_back == 0 && g.pad_top == 0 &&
                         g.pad_bottom == 0 && g.pad_left == 0 && g.pad_right == 0 &&
                         x.dtype() == in;
  // An F32 y takes the GEMM's output (and the bias, in its epilogue) directly; any other dtype
  // goes through an fp32 block so that the bias is added before the one rounding.
  const bool direct = y.dtype() == DType::F32;
  const int64_t esize = dtype_nbytes(in, 1);
  const int64_t per_voxel = (pointwise ? 0 : K * esize) + (direct ? 0 : Co * 4);
  int64_t block = per_voxel == 0 ? voxels : std::max(kMinBlock, kWorkspaceBytes / per_voxel);
  block = std::min(block, voxels);
  AVDIT_REQUIRE(block * std::max(K, Co) < kMaxBlockElements,
                "conv3d: weight {} too large for the CUDA kernel's block indices", w.shape_str());

  StreamBuffer col(c.stream(), static_cast<size_t>(pointwise ? 0 : block * K * esize));
  StreamBuffer acc(c.stream(), static_cast<size_t>(direct ? 0 : block * Co * 4));
  const Elt ct = elt_of(wk, "conv3d weight");
  const Geom geom{T,
                  H,
                  W,
                  Ho,
                  Wo,
                  static_cast<int32_t>(kh),
                  static_cast<int32_t>(kw),
                  g.stride_t,
                  g.stride_h,
                  g.stride_w,
                  g.pad_front,
                  g.pad_top,
                  g.pad_left,
                  g.time_pad == TimePad::Replicate};
  const bool words = x.dtype() == in && (Ci * esize) % 16 == 0 && aligned16(x.raw());
  const int64_t cw = Ci * esize / 16;
  for (int64_t v0 = 0; v0 < voxels; v0 += block) {
    const int64_t n = std::min(block, voxels - v0);
    const void* a = nullptr;
    if (pointwise) {
      a = static_cast<const char*>(x.raw()) + v0 * Ci * esize;
    } else {
      if (words) {
        const int64_t total = n * taps * cw;
        im2col_words_kernel<<<grid_for(total), kThreads, 0, c.stream()>>>(
            static_cast<const uint4*>(x.raw()), static_cast<uint4*>(col.p), geom, v0,
            static_cast<int32_t>(cw), static_cast<int32_t>(taps * cw), static_cast<int32_t>(total));
      } else {
        const int64_t total = n * K;
        im2col_kernel<<<grid_for(total), kThreads, 0, c.stream()>>>(
            x.raw(), xt, col.p, ct, geom, v0, static_cast<int32_t>(Ci), static_cast<int32_t>(K),
            static_cast<int32_t>(total));
      }
      AVDIT_CUDA_CHECK_LAUNCH();
      a = col.p;
    }
    GemmProblem p;
    p.a = a;
    p.b = wk.raw();
    p.bias = direct && bias ? b32.raw() : nullptr;
    p.d = direct ? static_cast<void*>(static_cast<float*>(device_ptr(y)) + v0 * Co) : acc.p;
    p.M = n;
    p.N = Co;
    p.K = K;
    p.lda = K;
    p.ldd = Co;
    p.in = in;
    p.out = DType::F32;
    p.b_kn = false;
    c.gemm().run(p);
    if (!direct) {
      const int64_t total = n * Co;
      bias_store_kernel<<<grid_for(total), kThreads, 0, c.stream()>>>(
          static_cast<const float*>(acc.p), bias ? static_cast<const float*>(b32.raw()) : nullptr,
          device_ptr(y), yt, v0 * Co, static_cast<int32_t>(Co), static_cast<int32_t>(total));
      AVDIT_CUDA_CHECK_LAUNCH();
    }
  }
}

}  // namespace

void conv3d(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
            const Conv3dGeometry& g, Tensor& y) {
  run(c, x, w, bias, g, y, true);
}

void conv3d_im2col(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
                   const Conv3dGeometry& g, Tensor& y) {
  run(c, x, w, bias, g, y, false);
}

}  // namespace avdit::ops::cuda
