// adaLN modulation and gated residual adds with per-token table rows: both DiTs modulate each
// token with the shift / scale / gate row of its modality (H3) or timestep, chosen by an index.
#include "backend/cuda/common.cuh"
#include "backend/cuda/ops_cuda.h"

namespace avdit::cuda {
namespace {

// One table operand: element (row t, channel c) lives at base[t * stride + col + c].
struct TableArg {
  const void* base;
  Elt elt;
  int64_t stride, col, rows;
};

// out[r, c] = x[r, c] * (1 + scale[i, c]) + shift[i, c], i = index[r]. `residual` selects the
// gated form instead: x[r, c] += gate[i, c] * f[r, c] (x is then also the output).
__global__ void modulate_kernel(bool residual, const void* x, Elt xt, TableArg a, TableArg b, const void* f,
                                Elt ft, const int* index, void* y, Elt yt, int64_t S, int64_t H) {
  const int64_t n = S * H;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / H, c = i % H;
    const int64_t t = index[r];  // range-checked on the host side is impossible without a sync;
    if (t < 0 || t >= a.rows) {  // an out-of-range row writes NaN so the bug cannot pass silently
      store_elt(y, yt, i, __int_as_float(0x7fc00000));
      continue;
    }
    const float xv = load_elt(x, xt, i);
    const float av = load_elt(a.base, a.elt, t * a.stride + a.col + c);
    if (residual) {
      store_elt(y, yt, i, xv + av * load_elt(f, ft, i));
    } else {
      const float bv = load_elt(b.base, b.elt, t * b.stride + b.col + c);  // b = scale, a = shift
      store_elt(y, yt, i, xv * (1.0f + bv) + av);
    }
  }
}

TableArg table_arg(const RowTable& t, int64_t H, const char* what) {
  require_cuda(t.table, what);
  AVDIT_REQUIRE(t.table.ndim() == 2 && t.col >= 0 && t.col + H <= t.table.size(1),
                "{}: table {} has no columns [{}, {})", what, t.table.shape_str(), t.col, t.col + H);
  return TableArg{t.table.raw(), elt_of(t.table, what), t.table.size(1), t.col, t.table.size(0)};
}

void check_rows(const Tensor& x, const Tensor& index, const char* what) {
  require_cuda(x, what);
  require_i32(index, what);
  AVDIT_REQUIRE(x.ndim() == 2 && index.numel() == x.size(0), "{}: x {} with {} row indices", what,
                x.shape_str(), index.numel());
}

}  // namespace

Tensor modulate(Device& dev, const Tensor& x, const RowTable& shift, const RowTable& scale, const Tensor& index,
                std::optional<DType> out) {
  check_rows(x, index, "modulate");
  const int64_t S = x.size(0), H = x.size(1);
  const TableArg sh = table_arg(shift, H, "modulate shift"), sc = table_arg(scale, H, "modulate scale");
  AVDIT_REQUIRE(sh.rows == sc.rows, "modulate: shift and scale tables have {} and {} rows", sh.rows, sc.rows);
  Tensor y = cuda_empty(dev, x.shape(), out.value_or(x.dtype()));
  if (y.numel() == 0) return y;
  modulate_kernel<<<grid_for(y.numel()), kThreads, 0, dev.stream()>>>(
      false, x.raw(), elt_of(x, "modulate"), sh, sc, nullptr, Elt::F32, index.data<int32_t>(), device_ptr(y),
      elt_of(y, "modulate"), S, H);
  AVDIT_CUDA_CHECK_LAUNCH();
  return y;
}

void gated_residual_(Device& dev, Tensor& x, const RowTable& gate, const Tensor& f, const Tensor& index) {
  check_rows(x, index, "gated_residual_");
  require_cuda(f, "gated_residual_ f");
  AVDIT_REQUIRE(f.shape() == x.shape(), "gated_residual_: x {} and f {} differ", x.shape_str(), f.shape_str());
  const int64_t S = x.size(0), H = x.size(1);
  const TableArg g = table_arg(gate, H, "gated_residual_ gate");
  if (x.numel() == 0) return;
  const Elt xt = elt_of(x, "gated_residual_");
  modulate_kernel<<<grid_for(x.numel()), kThreads, 0, dev.stream()>>>(
      true, x.raw(), xt, g, g, f.raw(), elt_of(f, "gated_residual_ f"), index.data<int32_t>(), device_ptr(x), xt,
      S, H);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda
