// The MoE combine knob (ops/moe.h CombineSum, `generate --moe-combine`, the floor of `avdit score`)
// on the GPU against the CPU oracle: a bf16 running sum under fp32 activations and an fp32 sum
// under bf16 activations, on one routing, at an odd size and the fused kernel's widths. The rows
// come from different GEMM orders, so the bf16 roundings may land on either side: NMSE 1e-4.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "ops/moe.h"
#include "testing/backend_ops.h"

namespace avdit::ops {
namespace {

using test_util::kBf16;
using test_util::random_tensor;

class MoeCombineBackend : public test_util::BackendOpsTest {};

TEST_F(MoeCombineBackend, ForcedSums) {
  struct Case {
    int64_t T, H, E, K, D, De;
  };
  for (const Case cs : {Case{77, 2, 9, 3, 64, 48}, Case{129, 3, 16, 4, 128, 128}}) {
    const int64_t G = cs.H * cs.E, W = cs.H * cs.D;
    const Tensor gate = random_tensor({G, cs.D}, DType::F32, 40, 1.5f / std::sqrt(float(cs.D)));
    const Tensor bias = random_tensor({G}, DType::F32, 41, 0.15f);
    const Tensor wg =
        random_tensor({G, cs.D, cs.De}, DType::BF16, 42, 2.5f / std::sqrt(float(cs.D)));
    const Tensor wu =
        random_tensor({G, cs.D, cs.De}, DType::BF16, 43, 2.5f / std::sqrt(float(cs.D)));
    const Tensor wd =
        random_tensor({G, cs.De, cs.D}, DType::BF16, 44, 0.3f / std::sqrt(float(cs.De)));
    for (const auto& [d, sum] :
         {std::pair{DType::F32, CombineSum::Bf16}, std::pair{DType::BF16, CombineSum::F32}}) {
      MoeConfig mc;
      mc.heads = cs.H, mc.experts = cs.E, mc.top_k = cs.K, mc.head_dim = cs.D,
      mc.route_scale = 2.5f;
      mc.combine = sum;
      const Tensor x = random_tensor({cs.T, W}, d, 47);
      const Routing r = route(cpu(), x, gate, bias, mc, false);
      check(
          {fmt::format("combine {} sum, {} act, T {} D {} De {}",
                       sum == CombineSum::Bf16 ? "bf16" : "fp32", dtype_name(d), cs.T, cs.D, cs.De),
           kBf16, [&](Context& c) {
             ExpertWeights w;
             w.inter = cs.De, w.begin = 0, w.end = cs.E;
             w.gate = {wg}, w.up = {wu}, w.down = {wd};
             w = prepare_experts(c, w, mc, d);
             const Routing rc{c.upload(r.indices), c.upload(r.weights), Tensor()};
             Tensor out = c.zeros({cs.T, W}, d);
             routed_experts(c, c.upload(x), rc, w, mc, out);
             return std::vector<Tensor>{out};
           }});
    }
  }
}

}  // namespace
}  // namespace avdit::ops
