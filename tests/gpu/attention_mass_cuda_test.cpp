// The attention sparsity probe's masses on the GPU (ops::attention_mass: float32 scores, float64
// sums, a radix select for the top-k) against the CPU's float64 reference, on fresh random q and k
// at odd sizes and at a full-width H3 head (128 dims, ~3k keys here), per dtype, for the pattern's
// k, a fixed k, k = 1 and k = every key; within 1e-5 as the probe's brute-force test.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/context.h"
#include "ops/attention_mass.h"
#include "testing/backend_ops.h"

namespace avdit::ops {
namespace {

using test_util::random_tensor;

class AttentionMassCuda : public test_util::BackendOpsTest {};

Tensor i32(const std::vector<int32_t>& v) {
  return Tensor::from_data({static_cast<int64_t>(v.size())}, DType::I32, v.data());
}

TEST_F(AttentionMassCuda, EqualsTheCpuReference) {
  struct Case {
    int64_t S, H, D, begin, end, frames;
    DType dt;
    float std;
  };
  for (const Case cs :
       {Case{61, 3, 24, 0, 55, 4, DType::F32, 1.5f}, Case{300, 2, 64, 20, 290, 7, DType::BF16, 1.f},
        Case{3100, 2, 128, 0, 3100, 12, DType::BF16, 1.f},
        Case{777, 1, 128, 5, 770, 5, DType::F16, 2.f}}) {
    // Rows: a text head, `frames` equal frames of video, an audio tail.
    const int64_t n_doc = cs.end - cs.begin, per = (n_doc - 20) / cs.frames;
    std::vector<int32_t> frame(cs.S, -1);
    for (int64_t f = 0; f < cs.frames; ++f)
      for (int64_t r = 0; r < per; ++r)
        frame[cs.begin + 10 + f * per + r] = static_cast<int32_t>(f);
    std::vector<int32_t> rows;
    for (int64_t r = cs.begin; r < cs.end; r += 3)
      if (frame[r] >= 0) rows.push_back(static_cast<int32_t>(r));
    const Tensor q = random_tensor({cs.S, cs.H, cs.D}, cs.dt, 31, cs.std),
                 k = random_tensor({cs.S, cs.H, cs.D}, cs.dt, 32, cs.std);
    const int64_t pattern_k = per + (n_doc - cs.frames * per);
    for (const int64_t fixed : {pattern_k, int64_t{7}, int64_t{1}, n_doc}) {
      const std::vector<int32_t> top_k(rows.size(), static_cast<int32_t>(fixed));
      for (int64_t head = 0; head < cs.H; ++head) {
        auto run = [&](Context& c) {
          const MassQueries m{c.upload(i32(rows)), c.upload(i32(top_k)), c.upload(i32(frame)),
                              cs.begin, cs.end};
          const auto n = static_cast<int64_t>(rows.size());
          Tensor topk = c.empty({n}, DType::F64), pattern = c.empty({n}, DType::F64);
          attention_mass(c, c.upload(q), c.upload(k), head, 1.0 / std::sqrt(double(cs.D)), m, topk,
                         pattern);
          return std::pair{c.download(topk), c.download(pattern)};
        };
        const auto [ct, cp] = run(cpu());
        const auto [gt, gp] = run(gpu());
        const std::string tag = fmt::format("S {} H {} D {} {} k {} head {}", cs.S, cs.H, cs.D,
                                            dtype_name(cs.dt), fixed, head);
        for (size_t i = 0; i < rows.size(); ++i) {
          ASSERT_NEAR(gt.data<double>()[i], ct.data<double>()[i], 1e-5) << tag << " query " << i;
          ASSERT_NEAR(gp.data<double>()[i], cp.data<double>()[i], 1e-5) << tag << " query " << i;
        }
        if (fixed == n_doc) {  // every key: the whole mass
          for (size_t i = 0; i < rows.size(); ++i) EXPECT_NEAR(gt.data<double>()[i], 1.0, 1e-9);
        }
      }
    }
  }
}

}  // namespace
}  // namespace avdit::ops
