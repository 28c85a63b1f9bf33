// The ops the ViT VAE decoders added, CPU (the oracle) against CUDA on fresh random inputs at odd
// and real sizes (tests/testing/backend_ops.h): the window moves bit-exact, the cross-fade
// bit-exact in F32 (both round each product and the sum, no FMA), LayerNorm within the fp32 bar
// (the GPU reduces in float32 in another order than the CPU's double) and the bf16 bar.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include <fmt/format.h>

#include "backend/cuda/context.h"
#include "ops/layer_norm.h"
#include "ops/rows.h"
#include "ops/window.h"
#include "testing/backend_ops.h"

namespace avdit::ops {
namespace {

using test_util::kExact;
using test_util::random_tensor;
using test_util::tol_for;

class VaeBackendOps : public test_util::BackendOpsTest {};

TEST_F(VaeBackendOps, LayerNorm) {
  for (const auto& [rows, D] :
       {std::pair<int64_t, int64_t>{7, 33}, {1, 1}, {47, 2048}, {300, 97}}) {
    const Tensor x = random_tensor({rows, D}, DType::F32, 1, 0.5f, 3.f);
    const Tensor w = random_tensor({D}, DType::F32, 2, 0.1f, 1.f);
    const Tensor b = random_tensor({D}, DType::F32, 3, 0.05f);
    for (DType d : {DType::F32, DType::BF16})
      for (bool affine : {true, false})
        check({fmt::format("layer_norm {}x{} affine {} {}", rows, D, affine, dtype_name(d)),
               tol_for(d), [&](Context& c) {
                 const Tensor wc = c.upload(w), bc = c.upload(b);
                 return std::vector<Tensor>{layer_norm(c, c.upload(x.to(d)), affine ? &wc : nullptr,
                                                       affine ? &bc : nullptr, 1e-5f, d)};
               }});
  }
}

TEST_F(VaeBackendOps, CopyWindow) {
  for (const auto& [P, R, C] :
       {std::tuple<int64_t, int64_t, int64_t>{3, 11, 13}, {84, 32, 48}, {3, 28, 1}}) {
    const Tensor src = random_tensor({P, R, C}, DType::F32, 4);
    const Window win{R / 3, C / 4, R - R / 3, C - C / 4};
    for (DType d : {DType::F32, DType::BF16})
      check({fmt::format("copy_window {}x{}x{} -> {}", P, R, C, dtype_name(d)), kExact,
             [&](Context& c) {
               Tensor dst = c.zeros({P, R + 5, C + 2}, d);
               copy_window(c, c.upload(src), win, dst, 3, 1);
               return std::vector<Tensor>{dst};
             }});
  }
}

TEST_F(VaeBackendOps, BlendRows) {
  for (const auto& [P, C, E] :
       {std::tuple<int64_t, int64_t, int64_t>{3, 1536, 5}, {2, 19, 7}, {1536, 1, 16}, {5, 3, 1}}) {
    const Tensor a = random_tensor({P, E + 3, C}, DType::F32, 5);
    const Tensor b = random_tensor({P, E + 4, C}, DType::F32, 6);
    for (DType d : {DType::F32, DType::BF16})
      check({fmt::format("blend_rows {}x{} extent {} {}", P, C, E, dtype_name(d)),
             d == DType::F32 ? kExact : tol_for(d), [&](Context& c) {
               // A copy: the CPU context's upload and an F32 -> F32 cast share storage, and the
               // blend is in place, so without it the CPU run would change the CUDA run's input.
               Tensor bc = cast(c, c.upload(b.clone()), d);
               blend_rows(c, cast(c, c.upload(a), d), 3, bc, 2, E);
               return std::vector<Tensor>{bc};
             }});
  }
}

}  // namespace
}  // namespace avdit::ops
