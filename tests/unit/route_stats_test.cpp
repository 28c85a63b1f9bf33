// Router statistics on the CPU, piece by piece: the router's score gap against a direct float64
// ordering, route_tally against counts made by hand, the stats file (round trip, every rejection
// a BadInput naming the file), the merge of runs, the analysis on statistics whose answers are
// known by construction, the two ranking rules and the mask file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <vector>

#include "analysis/routes/analysis.h"
#include "analysis/routes/mask.h"
#include "analysis/routes/recorder.h"
#include "analysis/routes/route_stats.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "ops/moe.h"
#include "ops/route_stats.h"

namespace avdit::analysis::routes {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const char* name) {
  const fs::path d =
      fs::temp_directory_path() / fmt::format("avdit_route_stats_{}_{}", name, ::getpid());
  fs::create_directories(d);
  return d;
}

Tensor random(Shape shape, std::mt19937& rng, float scale) {
  Tensor t = Tensor::empty(shape, DType::F32);
  std::normal_distribution<float> d(0.f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
  return t;
}

// The router's gap is the K-th minus the (K+1)-th biased score, the choices do not change when it
// is asked for, and K = E gives +inf.
TEST(RouteStats, RouterGapIsKthMinusNextBiasedScore) {
  std::mt19937 rng(7);
  ops::CpuContext ctx;
  for (const auto& [E, K] : {std::pair<int64_t, int64_t>{9, 3}, {16, 6}, {5, 5}}) {
    ops::MoeConfig c;
    c.heads = 3, c.experts = E, c.top_k = K, c.head_dim = 8;
    const int64_t T = 11;
    const Tensor x = random({T, c.heads * c.head_dim}, rng, 1.f);
    const Tensor gate = random({c.heads * E, c.head_dim}, rng, 0.5f);
    const Tensor bias = random({c.heads * E}, rng, 0.1f);
    const ops::Routing plain = ops::route(ctx, x, gate, bias, c);
    const ops::Routing r = ops::route(ctx, x, gate, bias, c, /*keep_logits=*/true, true);
    ASSERT_TRUE(r.gap.defined());
    ASSERT_FALSE(plain.gap.defined());
    ASSERT_EQ(r.gap.shape(), Shape({T, c.heads}));
    for (int64_t i = 0; i < r.indices.numel(); ++i)
      ASSERT_EQ(r.indices.data<int32_t>()[i], plain.indices.data<int32_t>()[i]);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < c.heads; ++h) {
        std::vector<double> b(E);
        for (int64_t e = 0; e < E; ++e) {
          const double logit = r.logits.f32()[(t * c.heads + h) * E + e];
          b[e] = 1.0 / (1.0 + std::exp(-logit)) + bias.f32()[h * E + e];
        }
        std::sort(b.begin(), b.end(), std::greater<>());
        const float got = r.gap.f32()[t * c.heads + h];
        if (K == E) {
          EXPECT_TRUE(std::isinf(got) && got > 0);
        } else {
          EXPECT_NEAR(got, b[K - 1] - b[K], 1e-6) << "t " << t << " h " << h;
          EXPECT_GE(got, 0.f);
        }
      }
  }
}

// route_tally adds exactly the choices and gap bins of each class; rows of class -1 are skipped;
// a second call adds to the first.
TEST(RouteStats, TallyCountsByClassBinAndGap) {
  const int64_t T = 5, H = 2, K = 2, C = 6, B = 10, E = 4;
  std::vector<int32_t> idx = {0, 1, 2, 3,  // t0: h0 {0,1}, h1 {2,3}
                              1, 0, 3, 2,  // t1
                              0, 3, 0, 3,  // t2
                              2, 1, 1, 2,  // t3 (class -1: skipped)
                              3, 0, 0, 1};
  std::vector<int32_t> cls = {0, 0, 5, -1, 2};
  const std::vector<float> edges = {1e-3f, 1e-2f, 1e-1f};
  std::vector<float> gap = {0.f,           5e-3f,  // t0
                            1e-3f,         0.5f,   // t1: exactly an edge goes above it
                            std::nanf(""), 2e-2f, 1.f, 1e-4f, 7e-2f, 1e-2f};
  Tensor indices = Tensor::from_data({T, H, K}, DType::I32, idx.data());
  Tensor rc = Tensor::from_data({T}, DType::I32, cls.data());
  Tensor g = Tensor::from_data({T, H}, DType::F32, gap.data());
  Tensor counts = Tensor::zeros({H, C, B, E}, DType::I64);
  Tensor hist = Tensor::zeros({H, C, 4}, DType::I64);
  ops::CpuContext ctx;
  ops::route_tally(ctx, indices, g, rc, 3, edges, counts, hist);
  ops::route_tally(ctx, indices, Tensor(), rc, 7, edges, counts, hist);  // no gap this time
  auto n = [&](int64_t h, int64_t c, int64_t b, int64_t e) {
    return counts.data<int64_t>()[((h * C + c) * B + b) * E + e];
  };
  auto gh = [&](int64_t h, int64_t c, int64_t g) {
    return hist.data<int64_t>()[(h * C + c) * 4 + g];
  };
  for (int b : {3, 7}) {
    EXPECT_EQ(n(0, 0, b, 0), 2);  // t0, t1
    EXPECT_EQ(n(0, 0, b, 1), 2);
    EXPECT_EQ(n(1, 0, b, 2), 2);
    EXPECT_EQ(n(1, 0, b, 3), 2);
    EXPECT_EQ(n(0, 5, b, 0), 1);  // t2
    EXPECT_EQ(n(0, 5, b, 3), 1);
    EXPECT_EQ(n(1, 2, b, 0), 1);  // t4
    EXPECT_EQ(n(1, 2, b, 1), 1);
  }
  int64_t total = 0;
  for (int64_t i = 0; i < counts.numel(); ++i) total += counts.data<int64_t>()[i];
  EXPECT_EQ(total, 2 * 4 * H * K);  // two calls x 4 counted rows x heads x K
  EXPECT_EQ(gh(0, 0, 0), 1);        // 0
  EXPECT_EQ(gh(1, 0, 1), 1);        // 5e-3
  EXPECT_EQ(gh(0, 0, 1), 1);        // 1e-3: [1e-3, 1e-2)
  EXPECT_EQ(gh(1, 0, 3), 1);        // 0.5
  EXPECT_EQ(gh(0, 5, 0), 1);        // NaN: bin 0
  EXPECT_EQ(gh(1, 5, 2), 1);        // 2e-2
  EXPECT_EQ(gh(0, 2, 2), 1);        // 7e-2
  EXPECT_EQ(gh(1, 2, 2), 1);        // 1e-2
  int64_t gaps = 0;
  for (int64_t i = 0; i < hist.numel(); ++i) gaps += hist.data<int64_t>()[i];
  EXPECT_EQ(gaps, 4 * H);
}

TEST(RouteStats, GapEdgesAreDecadesInTenths) {
  const auto& e = gap_edges();
  ASSERT_EQ(e.size(), size_t(kGapEdges));
  EXPECT_FLOAT_EQ(e[0], 1e-6f);
  EXPECT_FLOAT_EQ(e[gap_edge_of_power(-3)], 1e-3f);
  EXPECT_FLOAT_EQ(e[gap_edge_of_power(-2)], 1e-2f);
  EXPECT_FLOAT_EQ(e.back(), 1.f);
  EXPECT_TRUE(std::is_sorted(e.begin(), e.end()));
}

TEST(RouteStats, ParseRouteMaps) {
  const auto p = parse_route_maps("2:1:0,3:0:15");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].layer, 3);
  EXPECT_EQ(p[1].head, 0);
  EXPECT_EQ(p[1].step, 15);
  for (const char* bad : {"", "2:1", "2:1:0,", "a:1:0", "2:-1:0", "2:1:0:4", "2;1;0"})
    EXPECT_THROW(parse_route_maps(bad), BadInput) << bad;
}

// Statistics with known answers: 1 layer (block 5), 2 heads, 8 experts, top 2.
//  head 0: video picks {0, 1} (10 rows), audio {2, 3} (4 rows), text {0, 4} (2 rows);
//  head 1: every class picks {6, 7}. Step bins: cond rows in bin 0, uncond rows in bin 9.
//  Gaps: half of head 0's below 1e-3.
RouteStats known_stats() {
  RouteShape s{{5}, 2, 8, 2};
  RouteStats r = RouteStats::zeros(s);
  r.steps = {10};
  int64_t* n = r.counts.data<int64_t>();
  int64_t* g = r.gap_hist.data<int64_t>();
  int64_t* rows = r.rows.data<int64_t>();
  const int64_t sizes[3] = {10, 4, 2};
  const int64_t picks[3][2] = {{0, 1}, {2, 3}, {0, 4}};
  for (int m = 0; m < 3; ++m)
    for (int p = 0; p < 2; ++p) {
      const int b = p == 0 ? 0 : 9;
      rows[(m * 2 + p) * kStepBins + b] += sizes[m];
      for (int k = 0; k < 2; ++k) {
        n[r.count_index(0, 0, m, p, b, picks[m][k])] += sizes[m];
        n[r.count_index(0, 1, m, p, b, 6 + k)] += sizes[m];
      }
      g[r.gap_index(0, 0, m, p, 5)] += sizes[m];   // < 1e-3
      g[r.gap_index(0, 1, m, p, 50)] += sizes[m];  // ~0.1
    }
  return r;
}

TEST(RouteStats, FileRoundTripAndRejections) {
  const fs::path d = temp_dir("file");
  RouteStats s = known_stats();
  s.maps.push_back({5, 1, 3, Tensor::zeros({4, 2}, DType::I32)});
  s.row_class = Tensor::zeros({4}, DType::I32);
  s.video_grid = {1, 2, 2};
  write_route_stats(d / "a.safetensors", s);
  const RouteStats r = read_route_stats(d / "a.safetensors");
  EXPECT_EQ(r.shape, s.shape);
  EXPECT_EQ(r.steps, s.steps);
  ASSERT_EQ(r.maps.size(), 1u);
  EXPECT_EQ(r.maps[0].step, 3);
  EXPECT_EQ(r.video_grid[2], 2);
  for (int64_t i = 0; i < s.counts.numel(); ++i)
    ASSERT_EQ(r.counts.data<int64_t>()[i], s.counts.data<int64_t>()[i]);

  // Each rejection names the file.
  auto expect_bad = [&](const TensorMap& t, const std::map<std::string, std::string>& meta,
                        const char* what) {
    write_safetensors(d / "bad.safetensors", t, meta);
    try {
      read_route_stats(d / "bad.safetensors");
      ADD_FAILURE() << "accepted: " << what;
    } catch (const BadInput& e) {
      EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
    }
  };
  TensorMap t = read_all(d / "a.safetensors");
  for (auto& [k, v] : t) v = v.clone();
  const std::map<std::string, std::string> meta = {{"format", "avdit.route_stats"},
                                                   {"version", "1"},
                                                   {"heads", "2"},
                                                   {"experts", "8"},
                                                   {"top_k", "2"}};
  expect_bad(t, {}, "no metadata");
  auto meta2 = meta;
  meta2["experts"] = "16";
  expect_bad(t, meta2, "experts disagree with counts");
  TensorMap t2 = t;
  t2.erase("gap_hist");
  expect_bad(t2, meta, "no gap_hist");
  t2 = t;
  t2["counts"] = t["counts"].clone();
  t2["counts"].data<int64_t>()[0] += 1;  // no longer rows x heads x top_k
  expect_bad(t2, meta, "counts do not add up");
  t2 = t;
  t2["map.4.0.0"] = Tensor::zeros({4, 2}, DType::I32);
  expect_bad(t2, meta, "map of a layer that is not MoE");
  t2 = t;
  t2["steps"] = Tensor::zeros({1}, DType::I64);
  expect_bad(t2, meta, "zero steps");
  fs::remove_all(d);
}

TEST(RouteStats, MergeAddsRunsAndRefusesAnotherShape) {
  const RouteStats a = known_stats();
  const RouteStats m = merge_route_stats({a, a, a}, {"a", "b", "c"});
  EXPECT_EQ(m.runs(), 3);
  for (int64_t i = 0; i < a.counts.numel(); ++i)
    ASSERT_EQ(m.counts.data<int64_t>()[i], 3 * a.counts.data<int64_t>()[i]);
  RouteStats other = RouteStats::zeros(RouteShape{{5}, 2, 16, 2});
  other.steps = {10};
  try {
    merge_route_stats({a, other}, {"first.safetensors", "second.safetensors"});
    FAIL() << "merged different shapes";
  } catch (const BadInput& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("second.safetensors"), std::string::npos) << w;
    EXPECT_NE(w.find("first.safetensors"), std::string::npos) << w;
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
  }
}

TEST(RouteStats, AnalysisOfKnownStatistics) {
  const RouteStats a = known_stats();
  RouteStats b = known_stats();
  // b: head 1 of the video rows also picks expert 5 instead of 7 (so 5 is alive in b only).
  int64_t* n = b.counts.data<int64_t>();
  n[b.count_index(0, 1, 0, 0, 0, 7)] -= 10;
  n[b.count_index(0, 1, 0, 0, 0, 5)] += 10;
  const RouteAnalysis r = analyze_routes({a, b}, {"a", "b"});
  // Dead: head 0 never picks 5, 6, 7; head 1 never 0..4 (and 5 in a only).
  const std::vector<Pair> dead_all = {{5, 0, 5}, {5, 0, 6}, {5, 0, 7}, {5, 1, 0},
                                      {5, 1, 1}, {5, 1, 2}, {5, 1, 3}, {5, 1, 4}};
  EXPECT_EQ(r.dead_all, dead_all);
  std::vector<Pair> uni = dead_all;
  uni.push_back({5, 1, 5});
  std::sort(uni.begin(), uni.end());
  EXPECT_EQ(r.dead_union, uni);
  EXPECT_EQ(r.dead_per_file[0].size(), 9u);
  EXPECT_EQ(r.dead_per_file[1].size(), 8u);
  // Effective experts: video of head 0 is two equal experts -> 2.
  EXPECT_NEAR(r.effective[1][0][0], 2.0, 1e-12);
  EXPECT_NEAR(r.effective[2][0][0], 2.0, 1e-12);
  // All of head 0: counts (x2 files) 0: 24, 1: 20, 2: 8, 3: 8, 4: 4 over 64.
  {
    const double c[5] = {24, 20, 8, 8, 4};
    double h = 0;
    for (double x : c) h -= x / 64 * std::log(x / 64);
    EXPECT_NEAR(r.effective[0][0][0], std::exp(h), 1e-12);
  }
  // High-mass sets: exactly the picks.
  EXPECT_EQ(r.high_mass[0][0][0], (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(r.high_mass[1][0][0], (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.high_mass[2][0][0], (std::vector<int64_t>{0, 4}));
  // Jaccard video-audio: head 0 0/4, head 1 {5,6,7} vs {6,7} = 2/3.
  ASSERT_TRUE(r.jaccard[0]);
  EXPECT_NEAR(*r.jaccard[0], (0.0 + 2.0 / 3.0) / 2, 1e-12);
  // 8 experts <= 128: full coverage.
  EXPECT_DOUBLE_EQ(r.coverage[0], 1.0);
  // Cond (bin 0) and uncond (bin 9) alike in a: in a + b head 1 differs a little.
  ASSERT_TRUE(r.cond_uncond_cosine && r.early_late_cosine);
  EXPECT_EQ(r.early_bin, 0);
  EXPECT_EQ(r.late_bin, 9);
  EXPECT_NEAR(*r.cond_uncond_cosine, *r.early_late_cosine, 1e-12);  // bins and passes coincide
  EXPECT_LT(*r.cond_uncond_cosine, 1.0);
  EXPECT_GT(*r.cond_uncond_cosine, 0.8);
  EXPECT_DOUBLE_EQ(r.gap_cdf[0], 0.5);
  EXPECT_DOUBLE_EQ(r.gap_cdf[1], 0.5);
  const nlohmann::json j = routes_json(r);
  for (const char* key : {"dead_pairs", "effective_experts", "coverage_top128", "coverage_top192",
                          "gap_cdf", "cond_uncond_cosine", "early_late_cosine"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["dead_pairs"].size(), 8u);
  EXPECT_EQ(j["effective_experts"]["video"].size(), 1u);
  EXPECT_DOUBLE_EQ(j["gap_cdf"]["1e-3"].get<double>(), 0.5);
  EXPECT_NE(routes_markdown(r).find("| 5 |"), std::string::npos);
}

// The global rule keeps the most selected experts; the modality rule keeps each modality's own,
// so a small modality's experts survive a cut that the global rule makes.
TEST(RouteStats, KeepRulesAndMaskFile) {
  RouteStats s = RouteStats::zeros(RouteShape{{2}, 1, 8, 2});
  s.steps = {1};
  int64_t* n = s.counts.data<int64_t>();
  int64_t* rows = s.rows.data<int64_t>();
  // Video (100 rows): {0: 100, 1: 60, 2: 40}; audio (5 rows): {5: 5, 6: 5}.
  rows[0] = 100;
  rows[2 * kStepBins] = 5;
  n[s.count_index(0, 0, 0, 0, 0, 0)] = 100;
  n[s.count_index(0, 0, 0, 0, 0, 1)] = 60;
  n[s.count_index(0, 0, 0, 0, 0, 2)] = 40;
  n[s.count_index(0, 0, 1, 0, 0, 5)] = 5;
  n[s.count_index(0, 0, 1, 0, 0, 6)] = 5;
  EXPECT_EQ(rank_experts(s, 0, 0, KeepRule::Global),
            (std::vector<int64_t>{0, 1, 2, 5, 6, 3, 4, 7}));
  // Shares: video 0.5, 0.3, 0.2; audio 0.5, 0.5 -> 0 (total 100) before 5, 6 (total 5).
  EXPECT_EQ(rank_experts(s, 0, 0, KeepRule::Modality),
            (std::vector<int64_t>{0, 5, 6, 1, 2, 3, 4, 7}));
  const ExpertMask g = make_expert_mask(s, 3, KeepRule::Global);
  const ExpertMask m = make_expert_mask(s, 3, KeepRule::Modality);
  const std::vector<uint8_t> want_g = {1, 1, 1, 0, 0, 0, 0, 0}, want_m = {1, 0, 0, 0, 0, 1, 1, 0};
  EXPECT_TRUE(std::equal(want_g.begin(), want_g.end(), g.keep.data<uint8_t>()));
  EXPECT_TRUE(std::equal(want_m.begin(), want_m.end(), m.keep.data<uint8_t>()));
  EXPECT_THROW(make_expert_mask(s, 1, KeepRule::Global), BadInput);  // < top_k
  EXPECT_THROW(make_expert_mask(s, 9, KeepRule::Global), BadInput);  // > experts
  EXPECT_THROW(parse_keep_rule("median"), BadInput);

  const fs::path d = temp_dir("mask");
  write_expert_mask(d / "m.safetensors", m);
  const ExpertMask r = read_expert_mask(d / "m.safetensors");
  EXPECT_EQ(r.shape, m.shape);
  EXPECT_EQ(r.rule, KeepRule::Modality);
  EXPECT_EQ(r.kept, 3);
  // A mask for another config: refused when applied, naming the file.
  models::magi2::Magi2Config c;
  c.num_layers = 4;
  c.moe.moe_layers = {2};
  c.moe.num_heads = 1;
  c.moe.num_experts = 8;
  c.moe.top_k = 2;
  const auto bias = mask_router_bias(r, c, "m.safetensors");
  ASSERT_EQ(bias.count(2), 1u);
  EXPECT_EQ(bias.at(2).f32()[0], 0.f);
  EXPECT_EQ(bias.at(2).f32()[1], kMaskBias);
  c.moe.num_experts = 16;
  try {
    mask_router_bias(r, c, "m.safetensors");
    FAIL() << "a mask of 8 experts applied to 16";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("m.safetensors"), std::string::npos);
  }
  // A keep tensor whose shape is not the metadata's; a head keeping fewer than top_k.
  TensorMap t = read_all(d / "m.safetensors");
  for (auto& [k, v] : t) v = v.clone();
  const auto f = SafetensorsFile::open(d / "m.safetensors");
  t["keep"] = Tensor::zeros({1, 1, 4}, DType::U8);
  write_safetensors(d / "bad.safetensors", t, f->metadata());
  EXPECT_THROW(read_expert_mask(d / "bad.safetensors"), BadInput);
  t["keep"] = Tensor::zeros({1, 1, 8}, DType::U8);
  t["keep"].data<uint8_t>()[0] = 1;
  write_safetensors(d / "bad.safetensors", t, f->metadata());
  EXPECT_THROW(read_expert_mask(d / "bad.safetensors"), BadInput);
  fs::remove_all(d);
}

}  // namespace
}  // namespace avdit::analysis::routes
