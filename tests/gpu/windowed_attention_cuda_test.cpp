// The windowed attention kernel against its CPU reference on fresh random inputs (odd sizes with
// partly overlapping query ranges and uncovered queries; the refiner's real head shape, 32/8 heads
// of 128, on its own range list), F32 and BF16 (BF16 at head dim 128: the tensor-core kernel on
// sm_90), gate and log-sum-exp; then the refiner forward and refine() on the GPU in F32 against
// ../shared/golden/magi2-refiner-tiny at the README's bars.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <vector>

#include "io/safetensors.h"
#include "models/magi2/refiner/model.h"
#include "models/magi2/refiner/sampler.h"
#include "models/magi2/refiner/window_ranges.h"
#include "ops/windowed_attention.h"
#include "testing/random_ranges.h"
#include "testing/backend_ops.h"
#include "testing/golden_compare.h"

namespace avdit::ops {
namespace {

using test_util::random_tensor;

std::vector<RangePair> random_rows(int64_t S, int64_t Sk, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  return testing::random_range_rows(S, Sk, n, rng);
}

class WindowedAttentionCuda : public test_util::BackendOpsTest {
 protected:
  void run_case(const std::string& name, const std::vector<RangePair>& rows, int64_t S, int64_t Sk,
                int64_t Hq, int64_t Hkv, int64_t D, DType dt, uint32_t seed) {
    const Tensor q = random_tensor({S, Hq, D}, dt, seed),
                 k = random_tensor({Sk, Hkv, D}, dt, seed + 1),
                 v = random_tensor({Sk, Hkv, D}, dt, seed + 2),
                 g = random_tensor({S, Hq}, dt, seed + 3);
    const float scale = 1.f / std::sqrt(static_cast<float>(D));
    check({name, test_util::tol_for(dt), [&](Context& ctx) {
             const WindowPlan plan = plan_window(ctx, rows, S, Sk);
             Tensor lse = ctx.empty({S, Hq}, DType::F32);
             const Tensor o = windowed_attention(ctx, ctx.upload(q), ctx.upload(k), ctx.upload(v),
                                                 scale, plan, nullptr, dt, &lse);
             const Tensor gd = ctx.upload(g);
             const Tensor og = windowed_attention(ctx, ctx.upload(q), ctx.upload(k), ctx.upload(v),
                                                  scale, plan, &gd, dt);
             // Uncovered queries hold -inf: compare the finite entries (the CPU test checks the
             // rest).
             Tensor l = ctx.download(lse).clone();
             for (int64_t i = 0; i < l.numel(); ++i)
               if (!std::isfinite(l.f32()[i])) l.f32()[i] = 0.f;
             return std::vector<Tensor>{o, og, l};
           }});
  }
};

TEST_F(WindowedAttentionCuda, RandomRangeListsOddSizes) {
  run_case("windowed S37 Sk37 6/2x19 f32", random_rows(37, 37, 12, 1), 37, 37, 6, 2, 19, DType::F32,
           11);
  run_case("windowed S53 Sk41 4/4x8 f32", random_rows(53, 41, 20, 2), 53, 41, 4, 4, 8, DType::F32,
           12);
  run_case("windowed S29 Sk67 9/3x33 bf16", random_rows(29, 67, 30, 3), 29, 67, 9, 3, 33,
           DType::BF16, 13);
  run_case("windowed S1 Sk5 2/1x3 f32", random_rows(1, 5, 2, 4), 1, 5, 2, 1, 3, DType::F32, 14);
}

// bf16 with head dim 128 takes the tensor-core kernel on sm_90: segments longer than its 128-query
// tile, key ranges that end inside a 64-key tile, queries no row covers (0 and -inf), GQA 4:1.
TEST_F(WindowedAttentionCuda, TensorCoreTilesLongSegmentsAndUncoveredQueries) {
  const std::vector<RangePair> rows = {{{0, 300}, {0, 100}}, {{0, 170}, {120, 250}},
                                       {{305, 311}, {7, 9}}};
  run_case("windowed tc S320 Sk250 8/2x128 bf16", rows, 320, 250, 8, 2, 128, DType::BF16, 31);
  run_case("windowed tc random S300 Sk257 4/1x128 bf16", random_rows(300, 257, 40, 5), 300, 257, 4,
           1, 128, DType::BF16, 32);
}

TEST_F(WindowedAttentionCuda, RefinerHeadShapeOnItsRangeList) {
  models::magi2::refiner::WindowConfig w;
  w.block_t = 8, w.block_h = 4, w.block_w = 4, w.radius_t = w.radius_h = w.radius_w = 2;
  const auto grid = models::magi2::refiner::block_grid(9, 8, 21, w);  // partial blocks on t and w
  const int64_t L = 9 * 8 * 21 + 37;                                  // and a text tail
  const auto rows = models::magi2::refiner::window_range_list(grid, w, L);
  run_case("windowed refiner 32/8x128 f32", rows, L, L, 32, 8, 128, DType::F32, 21);
  run_case("windowed refiner 32/8x128 bf16", rows, L, L, 32, 8, 128, DType::BF16, 22);
}

}  // namespace
}  // namespace avdit::ops

namespace avdit::models::magi2::refiner {
namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "magi2-refiner-tiny";

TEST(Magi2RefinerCuda, ForwardAndRefineMatchTheGoldenInF32) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const TensorMap in = read_all(kFixture / "inputs.safetensors");
  const TensorMap out = read_all(kFixture / "outputs.safetensors");
  const TensorMap f = read_all(kFixture / "sampler.safetensors");
  ops::CudaContext ctx;
  const RefinerModel model(ctx, ckpt, DType::F32);
  const RefinerPlan plan = model.plan(in.at("video_latent").shape(), in.at("audio_latent").size(1),
                                      in.at("txt_feat").size(1));
  const Tensor mo = ctx.download(model.forward_packed(plan, in.at("x")));
  const double e = testing::golden_rel_err(mo, out.at("model_output"));
  std::printf("  GPU model_output %.3g of max\n", e);
  EXPECT_LE(e, 2e-5);

  RefineInputs ri;
  ri.preview_video = f.at("preview_video_latent");
  ri.text = f.at("txt_feat");
  ri.null_text = f.at("null_txt_feat");
  ri.height = 8;
  ri.width = 13;
  ri.video_noise = f.at("renoise_noise");
  const Refined r = refine(model, ri, model.config().sampler);
  const double ef = testing::golden_rel_err(r.video, f.at("final_video_latent"));
  std::printf("  GPU final_video_latent %.3g of max\n", ef);
  EXPECT_LE(ef, 2e-4);
}

}  // namespace
}  // namespace avdit::models::magi2::refiner
