// Element-wise kernels: silu, sigmoid, add, mul, and the gated activations of both DiTs (SwiGLU
// with the gate first for H3; swiglu7 interleaved and split for MAGI-2). fp32 math on any float
// storage; one thread per output element in a grid-stride loop.
#include "backend/cuda/common.cuh"
#include "backend/cuda/ops_cuda.h"

namespace avdit::cuda {
namespace {

enum class Unary : int { Silu, Sigmoid };
enum class Binary : int { Add, Mul };

__global__ void unary_kernel(Unary op, const void* x, Elt xt, void* y, Elt yt, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = load_elt(x, xt, i);
    store_elt(y, yt, i, op == Unary::Silu ? v / (1.0f + expf(-v)) : sigmoid_f(v));
  }
}

__global__ void binary_kernel(Binary op, const void* a, Elt at, const void* b, Elt bt, void* y, Elt yt,
                              int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float p = load_elt(a, at, i), q = load_elt(b, bt, i);
    store_elt(y, yt, i, op == Binary::Add ? p + q : p * q);
  }
}

// Gated activations. `layout` says where a row's gate and linear halves are.
enum class Gated : int { SwigluGateFirst, Swiglu7Interleaved, Swiglu7Split };

__device__ __forceinline__ float swiglu7(float g, float l) {
  const float gc = fminf(g, 7.0f);
  const float lc = fminf(fmaxf(l, -7.0f), 7.0f);
  return gc * sigmoid_f(1.702f * gc) * (lc + 1.0f);
}

// Output [rows, width]. For the fused forms u is [rows, 2 * width]; for the split form g = u and
// l = u2, both [rows, width].
__global__ void gated_kernel(Gated kind, const void* u, Elt ut, const void* u2, Elt u2t, void* y, Elt yt,
                             int64_t rows, int64_t width) {
  const int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width, c = i % width;
    float v;
    if (kind == Gated::SwigluGateFirst) {
      const float g = load_elt(u, ut, r * 2 * width + c), up = load_elt(u, ut, r * 2 * width + width + c);
      v = g / (1.0f + expf(-g)) * up;
    } else if (kind == Gated::Swiglu7Interleaved) {
      v = swiglu7(load_elt(u, ut, r * 2 * width + 2 * c), load_elt(u, ut, r * 2 * width + 2 * c + 1));
    } else {
      v = swiglu7(load_elt(u, ut, i), load_elt(u2, u2t, i));
    }
    store_elt(y, yt, i, v);
  }
}

Tensor unary(Device& dev, Unary op, const Tensor& x, const char* what) {
  require_cuda(x, what);
  const Elt xt = elt_of(x, what);
  Tensor y = cuda_empty(dev, x.shape(), x.dtype());
  if (x.numel() == 0) return y;
  unary_kernel<<<grid_for(x.numel()), kThreads, 0, dev.stream()>>>(op, x.raw(), xt, device_ptr(y), xt, x.numel());
  AVDIT_CUDA_CHECK_LAUNCH();
  return y;
}

void binary_into(Device& dev, Binary op, const Tensor& a, const Tensor& b, Tensor& y, const char* what) {
  require_cuda(a, what);
  require_cuda(b, what);
  AVDIT_REQUIRE(a.numel() == b.numel(), "{}: operands {} and {} differ in size", what, a.shape_str(),
                b.shape_str());
  const Elt at = elt_of(a, what), bt = elt_of(b, what), yt = elt_of(y, what);
  if (a.numel() == 0) return;
  binary_kernel<<<grid_for(a.numel()), kThreads, 0, dev.stream()>>>(op, a.raw(), at, b.raw(), bt, device_ptr(y), yt,
                                                                     a.numel());
  AVDIT_CUDA_CHECK_LAUNCH();
}

Tensor gated(Device& dev, Gated kind, const Tensor& u, const Tensor* u2, std::optional<DType> out,
             const char* what) {
  require_cuda(u, what);
  AVDIT_REQUIRE(u.ndim() >= 1, "{}: scalar input", what);
  const Elt ut = elt_of(u, what);
  Elt u2t = ut;
  Shape shape = u.shape();
  if (kind == Gated::Swiglu7Split) {
    require_cuda(*u2, what);
    AVDIT_REQUIRE(u.shape() == u2->shape(), "{}: gate {} and linear {} differ", what, u.shape_str(),
                  u2->shape_str());
    u2t = elt_of(*u2, what);
  } else {
    AVDIT_REQUIRE(shape.back() % 2 == 0, "{}: odd width {} (expected gate and linear halves)", what,
                  shape.back());
    shape.back() /= 2;
  }
  const int64_t width = shape.back(), rows = width ? shape_numel(shape) / width : 0;
  Tensor y = cuda_empty(dev, shape, out.value_or(u.dtype()));
  const Elt yt = elt_of(y, what);
  if (y.numel() == 0) return y;
  gated_kernel<<<grid_for(y.numel()), kThreads, 0, dev.stream()>>>(kind, u.raw(), ut, u2 ? u2->raw() : nullptr, u2t,
                                                                    device_ptr(y), yt, rows, width);
  AVDIT_CUDA_CHECK_LAUNCH();
  return y;
}

}  // namespace

Tensor silu(Device& dev, const Tensor& x) { return unary(dev, Unary::Silu, x, "silu"); }
Tensor sigmoid(Device& dev, const Tensor& x) { return unary(dev, Unary::Sigmoid, x, "sigmoid"); }

Tensor add(Device& dev, const Tensor& a, const Tensor& b) {
  require_cuda(a, "add");
  Tensor y = cuda_empty(dev, a.shape(), a.dtype());
  binary_into(dev, Binary::Add, a, b, y, "add");
  return y;
}

Tensor mul(Device& dev, const Tensor& a, const Tensor& b) {
  require_cuda(a, "mul");
  Tensor y = cuda_empty(dev, a.shape(), a.dtype());
  binary_into(dev, Binary::Mul, a, b, y, "mul");
  return y;
}

void add_(Device& dev, Tensor& a, const Tensor& b) { binary_into(dev, Binary::Add, a, b, a, "add_"); }

Tensor swiglu(Device& dev, const Tensor& gate_up, std::optional<DType> out) {
  return gated(dev, Gated::SwigluGateFirst, gate_up, nullptr, out, "swiglu");
}
Tensor swiglu7_interleaved(Device& dev, const Tensor& u, std::optional<DType> out) {
  return gated(dev, Gated::Swiglu7Interleaved, u, nullptr, out, "swiglu7_interleaved");
}
Tensor swiglu7_split(Device& dev, const Tensor& g, const Tensor& l, std::optional<DType> out) {
  return gated(dev, Gated::Swiglu7Split, g, &l, out, "swiglu7_split");
}

}  // namespace avdit::cuda
