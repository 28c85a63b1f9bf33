// The ops the text encoders added, CPU (the oracle) against CUDA on fresh random inputs at odd and
// real sizes (tests/testing/backend_ops.h): causal attention over packed documents (the portable
// kernel in F32, cuDNN in BF16), the causal depthwise conv1d + SiLU, and the Gated DeltaNet gates
// and recurrence (Qwen3.5). fp32 results within the fp32 bar (FMA and reduction orders differ),
// bf16 within the bf16 bar; BF16 attention within 2e-4 as in ops_backend_test.cpp (cuDNN rounds
// the probabilities to bf16 before P V).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/context.h"
#include "ops/attention.h"
#include "ops/causal_conv1d.h"
#include "ops/gated_delta_rule.h"
#include "testing/backend_ops.h"

namespace avdit::ops {
namespace {

using test_util::random_tensor;
using test_util::tol_for;

constexpr double kAttentionBf16 = 2e-4;

class TextBackendOps : public test_util::BackendOpsTest {};

TEST_F(TextBackendOps, CausalAttention) {
  struct Case {
    int64_t hq, hkv, dim;
    std::vector<int64_t> cu;
    bool sinks, gate;
  };
  const std::vector<Case> cases = {
      {4, 2, 64, {0, 37}, false, false},                  // odd length, GQA
      {3, 3, 40, {0, 1}, false, false},                   // one token: only itself
      {6, 2, 72, {0, 17, 17, 50, 81, 82}, false, false},  // packed documents, an empty one
      {4, 1, 128, {0, 29, 93, 100}, true, true},          // packed, with sinks and gate
      {64, 8, 128, {0, 203}, false, false},               // Qwen3-VL-32B's heads
      {16, 2, 128, {0, 700, 1531}, false, false},         // many tiles, dense + ragged graphs
      {24, 4, 256, {0, 150}, false, false},               // Qwen3.5's gated attention heads
  };
  for (const Case& k : cases) {
    const int64_t S = k.cu.back();
    for (DType d : {DType::F32, DType::BF16}) {
      const std::string tag = fmt::format(
          "causal attention {} S {} in {} docs Hq {} Hkv {} D {}{}{}", dtype_name(d), S,
          k.cu.size() - 1, k.hq, k.hkv, k.dim, k.sinks ? " sinks" : "", k.gate ? " gate" : "");
      const Tensor q = random_tensor({S, k.hq, k.dim}, d, 31),
                   kk = random_tensor({S, k.hkv, k.dim}, d, 32),
                   v = random_tensor({S, k.hkv, k.dim}, d, 33);
      const Tensor sinks = random_tensor({k.hq}, DType::F32, 34),
                   gate = random_tensor({S, k.hq}, d, 35);
      check({tag, d == DType::F32 ? tol_for(d) : kAttentionBf16, [&](Context& c) {
               Segments seg = plan_segments(c, k.cu, k.hq, k.dim, d);
               seg.causal = true;
               const Tensor sc = c.upload(sinks), gc = c.upload(gate);
               return std::vector<Tensor>{attention(c, c.upload(q), c.upload(kk), c.upload(v),
                                                    1.0f / std::sqrt(static_cast<float>(k.dim)),
                                                    seg, k.sinks ? &sc : nullptr,
                                                    k.gate ? &gc : nullptr)};
             }});
    }
  }
}

TEST_F(TextBackendOps, CausalConv1dSilu) {
  // T below K (the padding only), odd channel counts, the tiny golden's and Qwen3.5's widths.
  for (const auto& [T, C, K] : {std::tuple<int64_t, int64_t, int64_t>{37, 13, 4},
                                {1, 5, 4},
                                {3, 7, 4},
                                {29, 9, 3},
                                {333, 320, 4},
                                {150, 10240, 4}}) {
    const Tensor x = random_tensor({T, C}, DType::F32, 41);
    const Tensor w = random_tensor({C, 1, K}, DType::BF16, 42, 0.5f);  // the checkpoint's layout
    for (DType d : {DType::F32, DType::BF16})
      for (bool conv_layout : {true, false})
        check({fmt::format("causal_conv1d_silu T {} C {} K {} {} w {}", T, C, K, dtype_name(d),
                           conv_layout ? "[C, 1, K]" : "[C, K]"),
               tol_for(d), [&](Context& c) {
                 const Tensor wc = c.upload(conv_layout ? w : w.reshape({C, K}));
                 return std::vector<Tensor>{causal_conv1d_silu(c, c.upload(x.to(d)), wc)};
               }});
  }
}

TEST_F(TextBackendOps, DeltaRuleGates) {
  // A spread of 12 puts a few percent of a + dt_bias above softplus's threshold of 20.
  for (const auto& [T, H, spread] : {std::tuple<int64_t, int64_t, float>{37, 6, 1.f},
                                     {1, 3, 1.f},
                                     {300, 48, 1.f},
                                     {64, 5, 12.f}}) {
    const Tensor a = random_tensor({T, H}, DType::F32, 51, spread),
                 b = random_tensor({T, H}, DType::F32, 52, 2.f);
    const Tensor a_log = random_tensor({H}, DType::F32, 53, 0.5f),
                 dt_bias = random_tensor({H}, DType::BF16, 54);
    for (DType d : {DType::F32, DType::BF16})
      check(
          {fmt::format("delta_rule_gates T {} H {} spread {} a, b {}", T, H, spread, dtype_name(d)),
           tol_for(DType::F32), [&](Context& c) {
             Tensor g = c.empty({T, H}, DType::F32), beta = c.empty({T, H}, DType::F32);
             delta_rule_gates(c, c.upload(a.to(d)), c.upload(b.to(d)), c.upload(a_log),
                              c.upload(dt_bias), g, beta);
             return std::vector<Tensor>{g, beta};
           }});
  }
}

TEST_F(TextBackendOps, GatedDeltaRule) {
  struct Case {
    int64_t T, hk, hv, dk, dv;
  };
  const std::vector<Case> cases = {
      {37, 2, 6, 32, 32},       // the tiny golden's heads
      {1, 1, 1, 128, 128},      // one token
      {37, 1, 3, 13, 7},        // odd dk and dv (a column block mostly idle)
      {61, 2, 4, 128, 128},     // Qwen3.5's head dims, grouped key heads
      {45, 3, 3, 256, 40},      // the largest dk, several staged chunks
      {1000, 1, 2, 128, 128},   // a long recurrence
      {150, 16, 48, 128, 128},  // Qwen3.5 at full width
  };
  for (const Case& k : cases) {
    // Gates as the model makes them: a decay in (0, 1] per token, a write strength in (0, 1).
    Tensor g = Tensor::empty({k.T, k.hv}, DType::F32),
           beta = Tensor::empty({k.T, k.hv}, DType::F32);
    delta_rule_gates(cpu(), random_tensor({k.T, k.hv}, DType::F32, 61),
                     random_tensor({k.T, k.hv}, DType::F32, 62),
                     random_tensor({k.hv}, DType::F32, 63, 0.5f),
                     random_tensor({k.hv}, DType::F32, 64, 0.5f), g, beta);
    const Tensor q = random_tensor({k.T, k.hk, k.dk}, DType::F32, 65),
                 kk = random_tensor({k.T, k.hk, k.dk}, DType::F32, 66),
                 v = random_tensor({k.T, k.hv, k.dv}, DType::F32, 67);
    for (DType d : {DType::F32, DType::BF16})
      check({fmt::format("gated_delta_rule T {} Hk {} Hv {} dk {} dv {} {}", k.T, k.hk, k.hv, k.dk,
                         k.dv, dtype_name(d)),
             tol_for(d), [&](Context& c) {
               return std::vector<Tensor>{gated_delta_rule(c, c.upload(q.to(d)), c.upload(kk.to(d)),
                                                           c.upload(v.to(d)), c.upload(g),
                                                           c.upload(beta))};
             }});
  }
}

}  // namespace
}  // namespace avdit::ops
