// The attention sparsity probe (src/analysis/attention/) against a brute-force float64 computation
// (full softmax, every key sorted): on a random small layout, each query's top-k and pattern mass
// within 1e-5, for the pattern's k and a fixed k; H3's layout grouped into frames as packed; and on
// the tiny H3 model through the forward's q and k points, every (step, block, head) the probe
// reports equal to the brute force on the same q and k captured beside it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <random>

#include "analysis/attention/probe.h"
#include "analysis/attention/sparsity.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "models/h3/packing.h"
#include "ops/context.h"
#include "pipeline/generate_h3.h"
#include "pipeline/latent_shape.h"
#include "sample/sampler_loop.h"

namespace avdit::analysis {
namespace {

namespace fs = std::filesystem;

// Each video query's (top-k mass, pattern mass) by the definition, in float64.
std::vector<std::pair<double, double>> brute(const std::vector<float>& q,
                                             const std::vector<float>& k, int64_t heads, int64_t D,
                                             int64_t h, double scale,
                                             const std::vector<int64_t>& frame, int64_t begin,
                                             int64_t end, int64_t fixed_k) {
  int64_t non_video = 0;
  std::map<int64_t, int64_t> per_frame;
  for (int64_t r = begin; r < end; ++r) (frame[r] < 0 ? non_video : per_frame[frame[r]])++;
  std::vector<std::pair<double, double>> out;
  for (int64_t i = begin; i < end; ++i) {
    if (frame[i] < 0) continue;
    std::vector<double> s;
    for (int64_t j = begin; j < end; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d)
        dot += double(q[(i * heads + h) * D + d]) * double(k[(j * heads + h) * D + d]);
      s.push_back(scale * dot);
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (double v : s) z += std::exp(v - mx);
    std::vector<double> p;
    double pattern = 0;
    for (int64_t j = begin; j < end; ++j) {
      p.push_back(std::exp(s[j - begin] - mx) / z);
      if (frame[j] < 0 || frame[j] == frame[i]) pattern += p.back();
    }
    std::sort(p.begin(), p.end(), std::greater<double>());
    const int64_t kk =
        std::min<int64_t>(fixed_k > 0 ? fixed_k : per_frame[frame[i]] + non_video, end - begin);
    double top = 0;
    for (int64_t j = 0; j < kk; ++j) top += p[j];
    out.emplace_back(top, pattern);
  }
  return out;
}

TEST(AttentionSparsity, EqualsBruteForceOnARandomLayout) {
  // 7 text rows, 3 frames of 10 video rows, 8 audio rows, then 5 rows of a second document.
  const int64_t S = 50, heads = 3, D = 24;
  std::vector<int64_t> frame(S, -1);
  for (int64_t f = 0; f < 3; ++f)
    for (int64_t r = 0; r < 10; ++r) frame[7 + f * 10 + r] = f;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 1.5f);
  std::vector<float> q(S * heads * D), k(S * heads * D);
  for (float& v : q) v = nd(rng);
  for (float& v : k) v = nd(rng);
  const SparsityLayout l = SparsityLayout::make(frame, 0, 45);
  ops::CpuContext ctx;
  const Tensor qt = Tensor::from_floats(q, {S, heads, D}), kt = Tensor::from_floats(k, {S, heads, D});
  EXPECT_EQ(l.video_rows(), 30);
  EXPECT_EQ(l.pattern_keys, (std::vector<int64_t>{25, 25, 25}));
  for (const int64_t fixed_k : {int64_t{0}, int64_t{4}})
    for (int64_t h = 0; h < heads; ++h) {
      const double scale = 1 / std::sqrt(double(D));
      const HeadMass m = head_mass(ctx, qt, kt, h, scale, l, 1, fixed_k);
      const auto want = brute(q, k, heads, D, h, scale, frame, 0, 45, fixed_k);
      ASSERT_EQ(m.queries, 30);
      ASSERT_EQ(want.size(), 30u);
      std::vector<double> tk, pt;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(m.topk[i], want[i].first, 1e-5) << h << " " << i;
        EXPECT_NEAR(m.pattern[i], want[i].second, 1e-5) << h << " " << i;
        tk.push_back(want[i].first);
        pt.push_back(want[i].second);
      }
      EXPECT_NEAR(m.topk_median, median(tk), 1e-5);
      EXPECT_NEAR(m.pattern_median, median(pt), 1e-5);
      // A strided sample measures the same queries' values.
      const HeadMass s = head_mass(ctx, qt, kt, h, scale, l, 7, fixed_k);
      ASSERT_EQ(s.queries, 5);
      for (int64_t i = 0; i < 5; ++i) EXPECT_NEAR(s.pattern[i], want[i * 7].second, 1e-5);
    }
}

TEST(AttentionSparsity, H3LayoutGroupsVideoRowsByFrame) {
  const models::h3::PackedLayout p = models::h3::pack_layout(6, 3, 4, 6, 9);
  const SparsityLayout l = h3_sparsity_layout(p);
  EXPECT_EQ(l.video_rows(), 3 * 2 * 3);
  const int64_t non_video = (l.end - l.begin) - l.video_rows();
  ASSERT_EQ(l.pattern_keys.size(), 3u);
  for (int64_t n : l.pattern_keys) EXPECT_EQ(n, 6 + non_video);
  for (size_t i = 0; i < p.target_img_pos.size(); ++i)
    EXPECT_EQ(l.frame[p.target_img_pos[i]], int64_t(i / 6));
}

// Keeps block{}_q_rope / k_rope of each step's first call, as the probe sees them.
class Capture final : public Probe {
 public:
  std::map<std::pair<int, int>, std::pair<Tensor, Tensor>> qk;
  bool wants(const Point& p) const override {
    return (p.is(sample::kInputPoint) && p.part <= 0) || p.is("block{}_q_rope") ||
           p.is("block{}_k_rope");
  }
  void on(ops::Context& ctx, const Point& p, Tensor& t) override {
    if (p.is(sample::kInputPoint)) {
      step_ = static_cast<int>(p.index);
      return;
    }
    auto& slot = qk[{step_, static_cast<int>(p.index)}];
    Tensor& dst = p.is("block{}_q_rope") ? slot.first : slot.second;
    if (!dst.defined()) dst = ctx.download(t).to_f32().clone();
  }

 private:
  int step_ = -1;
};

TEST(AttentionSparsity, ProbeOnTheTinyH3EqualsBruteForce) {
  const fs::path dir =
      fs::temp_directory_path() / ("avdit_attention_probe_" + std::to_string(::getpid()));
  models::h3::init_checkpoint(
      read_json(std::string(AVDIT_SHARED_DIR) + "/golden/h3-tiny/config.json"), dir, 21);
  ops::CpuContext ctx;
  const Checkpoint ckpt = Checkpoint::open(dir);
  const models::h3::H3Model model(ctx, ckpt);
  pipeline::H3GenerateOptions o;
  Tensor text = Tensor::empty({5, model.config().text_dim}, DType::F32);
  fill_normal(text, 3, 4);
  o.text = {text, "test:text_embeds"};
  o.run.steps = 3;
  const auto shapes = pipeline::latent_shapes_from_string("h3", *ckpt.config(), "3,4,6,8");
  o.run.video_shape = shapes.video;
  o.run.audio_shape = shapes.audio;
  const models::h3::PackedLayout layout = models::h3::pack_layout(5, 3, 4, 6, 8);
  const auto& c = model.config();
  const double scale = 1 / std::sqrt(double(c.attention_head_dim));
  SparsityOptions so;
  so.steps = {0, 2};
  AttentionSparsityProbe probe(h3_sparsity_layout(layout), c.num_attention_heads,
                               c.attention_head_dim, scale, so);
  Capture capture;
  {
    const ProbeScope a(ctx.observer(), &probe), b(ctx.observer(), &capture);
    pipeline::generate_h3(model, o);
  }
  const int64_t blocks = static_cast<int64_t>(model.weights().blocks.size()),
                heads = c.num_attention_heads;
  ASSERT_EQ(static_cast<int64_t>(probe.triples().size()), 2 * blocks * heads);
  const SparsitySummary s = probe.summary(3 * blocks * heads);
  EXPECT_EQ(s.covered, 2 * blocks * heads);
  EXPECT_EQ(s.total, 3 * blocks * heads);
  const SparsityLayout& l = probe.layout();
  for (const TripleMass& t : probe.triples()) {
    const auto& [q, k] = capture.qk.at({t.step, t.block});
    const std::vector<float> qv(q.f32(), q.f32() + q.numel()), kv(k.f32(), k.f32() + k.numel());
    const auto want =
        brute(qv, kv, heads, c.attention_head_dim, t.head, scale, l.frame, l.begin, l.end, 0);
    std::vector<double> tk, pt;
    for (const auto& [a, b] : want) tk.push_back(a), pt.push_back(b);
    EXPECT_NEAR(t.topk_median, median(tk), 1e-5) << t.step << " " << t.block << " " << t.head;
    EXPECT_NEAR(t.pattern_median, median(pt), 1e-5) << t.step << " " << t.block << " " << t.head;
    EXPECT_TRUE(t.step == 0 || t.step == 2);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace avdit::analysis
