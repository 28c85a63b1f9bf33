// The row/column ops that are compositions of the primitives (see ops/rows.h).
#include "ops/rows.h"

#include "core/error.h"

namespace avdit::ops {

Tensor take_columns(Context& ctx, const Tensor& x, int64_t begin, int64_t end) {
  AVDIT_CHECK(x.ndim() == 2 && 0 <= begin && begin <= end && end <= x.size(1),
              "take_columns [{}, {}) of {}", begin, end, x.shape_str());
  Tensor y = ctx.empty({x.size(0), end - begin}, x.dtype());
  copy_columns(ctx, x, begin, y, 0, end - begin);
  return y;
}

Tensor concat_columns(Context& ctx, const Tensor& a, const Tensor& b) {
  AVDIT_CHECK(a.ndim() == 2 && b.ndim() == 2 && a.size(0) == b.size(0) && a.dtype() == b.dtype(),
              "concat_columns: {} and {}", a.shape_str(), b.shape_str());
  Tensor y = ctx.empty({a.size(0), a.size(1) + b.size(1)}, a.dtype());
  copy_columns(ctx, a, 0, y, 0, a.size(1));
  copy_columns(ctx, b, 0, y, a.size(1), b.size(1));
  return y;
}

Tensor concat_rows(Context& ctx, const std::vector<Tensor>& parts) {
  AVDIT_CHECK(!parts.empty(), "concat_rows of nothing");
  if (parts.size() == 1) return parts[0];
  Shape shape = parts[0].shape();
  int64_t rows = 0;
  for (const Tensor& t : parts) {
    AVDIT_CHECK(
        t.dtype() == parts[0].dtype() && t.numel() * shape[0] == parts[0].numel() * t.size(0),
        "concat_rows: {} and {}", t.shape_str(), parts[0].shape_str());
    rows += t.size(0);
  }
  shape[0] = rows;
  Tensor y = ctx.empty(shape, parts[0].dtype());
  int64_t r = 0;
  for (const Tensor& t : parts) {
    if (t.size(0) == 0) continue;
    Tensor dst = y.slice_rows(r, r + t.size(0));
    copy_(ctx, dst, t);
    r += t.size(0);
  }
  return y;
}

Tensor index_tensor(Context& ctx, const std::vector<int64_t>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::I32);
  for (size_t i = 0; i < values.size(); ++i) {
    AVDIT_CHECK(values[i] >= INT32_MIN && values[i] <= INT32_MAX, "index {} does not fit 32 bits",
                values[i]);
    t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
  }
  return ctx.upload(t);
}

Tensor index_tensor(Context& ctx, const std::vector<int32_t>& values) {
  return ctx.upload(
      Tensor::from_data({static_cast<int64_t>(values.size())}, DType::I32, values.data()));
}

}  // namespace avdit::ops
