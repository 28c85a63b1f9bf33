// Router statistics end to end on the CPU, on a checkpoint whose routing is known by construction
// (testing/planted_routes.h): generate with the recorder attached collects exactly the planted
// choices (every count, the rows per modality and pass, the sum rows x top_k x heads x layers, the
// gap bin, the route maps); the analysis recovers the dead pairs and each modality's experts; a
// masked run (F32, and bf16 with NVFP4 experts) never selects a masked expert; a mask that keeps
// the planted experts changes nothing; two runs give the same file bit for bit.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "analysis/routes/analysis.h"
#include "analysis/routes/mask.h"
#include "analysis/routes/recorder.h"
#include "analysis/routes/route_stats.h"
#include "io/safetensors.h"
#include "models/magi2/model.h"
#include "pipeline/generate_magi2.h"
#include "testing/planted_routes.h"

namespace avdit::analysis::routes {
namespace {

namespace fs = std::filesystem;

const fs::path kGolden = fs::path(AVDIT_SHARED_DIR) / "golden" / "magi2-tiny";

using PlantedRun = avdit::testing::RoutedRun;

PlantedRun generate(const fs::path& model_dir, DType act = DType::F32, bool nvfp4 = false,
                    std::map<int64_t, Tensor> mask = {}, std::vector<RouteMapPoint> maps = {}) {
  ops::CpuContext ctx;
  return avdit::testing::run_with_route_stats(ctx, model_dir, kGolden, act, nvfp4, std::move(mask),
                                              std::move(maps));
}

std::string bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class PlantedRoutesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / fmt::format("avdit_planted_routes_{}", ::getpid());
    planted_ =
        new avdit::testing::PlantedRoutes(avdit::testing::write_planted_routes(kGolden, dir_));
    run_ = new PlantedRun(generate(dir_, DType::F32, false, {}, {{2, 1, 0}, {3, 0, 3}}));
  }
  static void TearDownTestSuite() {
    delete run_;
    delete planted_;
    fs::remove_all(dir_);
  }
  static fs::path dir_;
  static avdit::testing::PlantedRoutes* planted_;
  static PlantedRun* run_;
};
fs::path PlantedRoutesTest::dir_;
avdit::testing::PlantedRoutes* PlantedRoutesTest::planted_ = nullptr;
PlantedRun* PlantedRoutesTest::run_ = nullptr;

// The packed sequence of the fixture: per item 2 x 4 x 6 = 48 video tokens and 20 audio tokens;
// text 10 (cond) and 7 (uncond). 4 steps: step s in bin 10 s / 4 = 0, 2, 5, 7.
constexpr int64_t kRows[3][2] = {{48, 48}, {20, 20}, {10, 7}};
constexpr int kBins[4] = {0, 2, 5, 7};

TEST_F(PlantedRoutesTest, CollectsExactlyThePlantedChoices) {
  const RouteStats& s = run_->stats;
  const auto& p = *planted_;
  ASSERT_EQ(s.shape.layers, p.layers);
  ASSERT_EQ(s.shape.heads, p.heads);
  ASSERT_EQ(s.shape.experts, p.experts);
  ASSERT_EQ(s.shape.top_k, p.top_k);
  ASSERT_EQ(s.steps, std::vector<int64_t>{4});
  const int64_t* rows = s.rows.data<int64_t>();
  for (int m = 0; m < 3; ++m)
    for (int q = 0; q < 2; ++q)
      for (int b = 0; b < kStepBins; ++b) {
        const bool used = std::find(std::begin(kBins), std::end(kBins), b) != std::end(kBins);
        EXPECT_EQ(rows[(m * 2 + q) * kStepBins + b], used ? kRows[m][q] : 0) << m << q << b;
      }
  const int64_t* n = s.counts.data<int64_t>();
  int64_t total = 0;
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int m = 0; m < 3; ++m)
        for (int q = 0; q < 2; ++q)
          for (int b = 0; b < kStepBins; ++b)
            for (int64_t e = 0; e < p.experts; ++e) {
              const auto& c = p.chosen[l][h][m];
              const bool chosen = std::find(c.begin(), c.end(), e) != c.end();
              const int64_t v = n[s.count_index(l, h, m, q, b, e)];
              total += v;
              ASSERT_EQ(v, chosen ? rows[(m * 2 + q) * kStepBins + b] : 0)
                  << "layer " << l << " head " << h << " modality " << m << " pass " << q << " bin "
                  << b << " expert " << e;
            }
  // tokens (153 per forward, both items) x top_k x heads x layers x steps (passes: the items).
  EXPECT_EQ(total, 153 * 3 * 2 * 2 * 4);
  // Every gap in the planted bin.
  const int64_t* g = s.gap_hist.data<int64_t>();
  for (int64_t i = 0; i < s.gap_hist.numel(); ++i)
    if (i % kGapBins != avdit::testing::kPlantedGapBin) {
      ASSERT_EQ(g[i], 0) << "gap bin " << i % kGapBins;
    }
  int64_t gaps = 0;
  for (int64_t i = 0; i < s.gap_hist.numel(); ++i) gaps += g[i];
  EXPECT_EQ(gaps, 153 * 2 * 2 * 4);
  // Route maps: each row's experts are its modality's planted ones.
  ASSERT_EQ(s.maps.size(), 2u);
  for (const RouteMap& m : s.maps) {
    const int64_t l = m.layer == 2 ? 0 : 1;
    ASSERT_EQ(m.experts.size(0), 153);
    for (int64_t r = 0; r < 153; ++r) {
      const int32_t cls = s.row_class.data<int32_t>()[r];
      std::vector<int64_t> got(m.experts.data<int32_t>() + r * 3,
                               m.experts.data<int32_t>() + r * 3 + 3);
      std::sort(got.begin(), got.end());
      ASSERT_EQ(got, p.chosen[l][m.head][cls / 2]) << "map " << m.layer << " row " << r;
    }
  }
  EXPECT_EQ(s.video_grid, (std::array<int64_t, 3>{2, 4, 6}));
}

TEST_F(PlantedRoutesTest, AnalysisRecoversDeadPairsAndPreferences) {
  const RouteAnalysis a = analyze_routes(std::vector<RouteStats>{run_->stats}, {"planted"});
  const auto& p = *planted_;
  std::vector<Pair> dead(p.dead.begin(), p.dead.end());
  EXPECT_EQ(a.dead_all, dead);
  EXPECT_EQ(a.dead_all.size(), 2u * 2u * 7u);  // per head: 4 undesignated + 3 bias-killed
  for (int m = 0; m < 3; ++m)
    for (size_t l = 0; l < 2; ++l)
      for (int64_t h = 0; h < p.heads; ++h) {
        EXPECT_EQ(a.high_mass[m][l][h], p.chosen[l][h][m]) << m << l << h;
        EXPECT_NEAR(a.effective[1 + m][l][h], 3.0, 1e-12);  // three equal experts
      }
  ASSERT_TRUE(a.jaccard[0] && a.jaccard[1] && a.jaccard[2]);
  EXPECT_EQ(*a.jaccard[0], 0.0);  // disjoint by construction
  EXPECT_EQ(*a.jaccard[2], 0.0);
  EXPECT_DOUBLE_EQ(a.gap_cdf[1], 0.0);  // every gap ~0.45
  ASSERT_TRUE(a.cond_uncond_cosine);
  EXPECT_GT(*a.cond_uncond_cosine, 0.99);  // the same experts, text a little shorter uncond
}

TEST_F(PlantedRoutesTest, MaskedRunsNeverSelectAMaskedExpert) {
  const ExpertMask mask = make_expert_mask(run_->stats, 3, KeepRule::Global);
  const models::magi2::Magi2Config config =
      models::magi2::parse_magi2_config(read_json(dir_ / "config.json"));
  const auto bias = mask_router_bias(mask, config, "mask");
  for (const auto& [act, nvfp4] : {std::pair{DType::F32, false}, std::pair{DType::BF16, true}}) {
    const PlantedRun r = generate(dir_, act, nvfp4, bias);
    const RouteStats& s = r.stats;
    const int64_t* n = s.counts.data<int64_t>();
    const uint8_t* keep = mask.keep.data<uint8_t>();
    int64_t kept = 0;
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t h = 0; h < 2; ++h)
        for (int m = 0; m < 3; ++m)
          for (int q = 0; q < 2; ++q)
            for (int b = 0; b < kStepBins; ++b)
              for (int64_t e = 0; e < 16; ++e) {
                const int64_t v = n[s.count_index(l, h, m, q, b, e)];
                if (!keep[(l * 2 + h) * 16 + e]) {
                  ASSERT_EQ(v, 0) << "masked expert " << e << " selected";
                }
                kept += v;
              }
    EXPECT_EQ(kept, 153 * 3 * 2 * 2 * 4) << (nvfp4 ? "bf16 / nvfp4" : "f32");
    // The kept experts are video's (the most rows): the video choices do not move.
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t e : planted_->chosen[l][h][0]) EXPECT_EQ(keep[(l * 2 + h) * 16 + e], 1);
  }
}

TEST_F(PlantedRoutesTest, AMaskKeepingThePlantedExpertsChangesNothing) {
  const ExpertMask mask = make_expert_mask(run_->stats, 9, KeepRule::Modality);
  const models::magi2::Magi2Config config =
      models::magi2::parse_magi2_config(read_json(dir_ / "config.json"));
  const PlantedRun r = generate(dir_, DType::F32, false, mask_router_bias(mask, config, "mask"));
  for (int64_t i = 0; i < r.stats.counts.numel(); ++i)
    ASSERT_EQ(r.stats.counts.data<int64_t>()[i], run_->stats.counts.data<int64_t>()[i]);
  for (int64_t i = 0; i < r.video.numel(); ++i)
    ASSERT_EQ(r.video.f32()[i], run_->video.f32()[i]) << "the forward changed";
}

// Two runs of the golden model (ordinary random routing), the same file bit for bit.
TEST(RouteStatsDeterminism, SameFileFromTwoRuns) {
  const fs::path d = fs::temp_directory_path() / fmt::format("avdit_route_det_{}", ::getpid());
  fs::create_directories(d);
  for (int i = 0; i < 2; ++i)
    write_route_stats(d / fmt::format("{}.safetensors", i),
                      generate(kGolden, DType::F32, false, {}, {{3, 1, 2}}).stats);
  const std::string a = bytes(d / "0.safetensors"), b = bytes(d / "1.safetensors");
  EXPECT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b);
  // It is also a file the reader accepts, and it has some dead pairs and some live ones.
  const RouteStats s = read_route_stats(d / "0.safetensors");
  const RouteAnalysis r = analyze_routes(std::vector<RouteStats>{s}, {"golden"});
  EXPECT_LT(r.dead_all.size(), 2u * 2u * 16u);
  fs::remove_all(d);
}

}  // namespace
}  // namespace avdit::analysis::routes
