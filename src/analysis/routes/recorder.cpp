// The router statistics probe (see recorder.h).
#include "analysis/routes/recorder.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "core/error.h"
#include "models/magi2/token_layout.h"
#include "ops/route_stats.h"
#include "ops/rows.h"

namespace avdit::analysis::routes {

namespace magi2 = models::magi2;

namespace {

constexpr const char* kRouterPoint = "moe.{}.router";
constexpr const char* kGapPoint = "moe.{}.router.gap";
constexpr const char* kStepPoint = "step.input";

}  // namespace

std::vector<RouteMapPoint> parse_route_maps(const std::string& spec) {
  std::vector<RouteMapPoint> out;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    int64_t v[3] = {-1, -1, -1};
    const char* p = item.data();
    const char* end = item.data() + item.size();
    bool ok = true;
    for (int i = 0; i < 3 && ok; ++i) {
      const auto [q, ec] = std::from_chars(p, end, v[i]);
      ok = ec == std::errc() && v[i] >= 0 && v[i] < (int64_t{1} << 31);
      p = q;
      if (i < 2) ok = ok && p < end && *p++ == ':';
    }
    AVDIT_REQUIRE(ok && p == end,
                  "--route-maps: '{}' is not LAYER:HEAD:STEP (block index, head, 0-based step; "
                  "several separated by commas)",
                  item);
    out.push_back({v[0], v[1], v[2]});
    pos = comma + 1;
  }
  return out;
}

std::vector<int32_t> row_classes(const magi2::PackedSequence& layout) {
  const magi2::TokenLayout order = magi2::TokenLayout::from_modality(layout.modality);
  const std::vector<int64_t>& cu = layout.cu_seqlens;
  std::vector<int32_t> cls(order.perm.size());
  for (size_t r = 0; r < cls.size(); ++r) {
    const int64_t l = order.perm[r];
    int32_t m = layout.modality[static_cast<size_t>(l)];
    if (m == magi2::kTime) m = magi2::kText;
    // The item holding packed row l: cu[item] <= l < cu[item + 1].
    const int64_t item = std::upper_bound(cu.begin(), cu.end(), l) - cu.begin() - 1;
    cls[r] = m * kPasses + (item <= 0 ? 0 : 1);
  }
  return cls;
}

int64_t RouteRecorder::ordinal(int64_t layer) const {
  auto it = std::find(shape_.layers.begin(), shape_.layers.end(), layer);
  return it == shape_.layers.end() ? -1 : it - shape_.layers.begin();
}

void RouteRecorder::begin(ops::Context& ctx, const magi2::Magi2Config& c,
                          const magi2::PackedSequence& layout, int steps) {
  AVDIT_CHECK(steps >= 1, "route recorder: {} steps", steps);
  shape_ = RouteShape{};
  for (int64_t i = 0; i < c.num_layers; ++i)
    if (c.is_moe_layer(i)) shape_.layers.push_back(i);
  shape_.heads = c.moe.num_heads;
  shape_.experts = c.moe.num_experts;
  shape_.top_k = c.moe.top_k;
  AVDIT_REQUIRE(!shape_.layers.empty(), "--route-stats: this model has no MoE layer");
  for (const RouteMapPoint& m : map_points_) {
    AVDIT_REQUIRE(ordinal(m.layer) >= 0, "--route-maps {}:{}:{}: block {} is not a MoE layer ({})",
                  m.layer, m.head, m.step, m.layer, shape_.str());
    AVDIT_REQUIRE(m.head < shape_.heads, "--route-maps {}:{}:{}: head {} of {} heads", m.layer,
                  m.head, m.step, m.head, shape_.heads);
    AVDIT_REQUIRE(m.step < steps, "--route-maps {}:{}:{}: step {} of a {}-step run (0-based)",
                  m.layer, m.head, m.step, m.step, steps);
  }
  steps_ = steps;
  step_ = 0;
  const std::vector<int32_t> cls = row_classes(layout);
  class_rows_.assign(kClasses, 0);
  for (int32_t k : cls) ++class_rows_[static_cast<size_t>(k)];
  rows_.assign(static_cast<size_t>(kClasses * kStepBins), 0);
  row_class_host_ = Tensor::empty({static_cast<int64_t>(cls.size())}, DType::I32);
  if (!cls.empty())
    std::memcpy(row_class_host_.data<int32_t>(), cls.data(), cls.size() * sizeof(int32_t));
  row_class_ = ctx.upload(row_class_host_);
  const int64_t pt = c.data_proxy.t_patch_size, ps = c.data_proxy.patch_size;
  video_grid_ = {layout.T / pt, layout.H / ps, layout.W / ps};
  const int64_t L = shape_.moe_layers(), H = shape_.heads, E = shape_.experts;
  counts_ = ctx.zeros({L, H, kClasses, kStepBins, E}, DType::I64);
  gap_hist_ = ctx.zeros({L, H, kClasses, kGapBins}, DType::I64);
  pending_gap_ = Tensor();
  pending_gap_layer_ = -1;
  maps_.clear();
  begun_ = true;
}

bool RouteRecorder::wants(const Point& p) const {
  return begun_ && (p.is(kRouterPoint) || p.is(kGapPoint) || (p.is(kStepPoint) && p.part <= 0));
}

void RouteRecorder::on(ops::Context& ctx, const Point& p, Tensor& t) {
  if (p.is(kStepPoint)) {
    AVDIT_CHECK(p.index >= 0 && p.index < steps_, "route recorder: step {} of {}", p.index, steps_);
    step_ = static_cast<int>(p.index);
    return;
  }
  if (p.is(kGapPoint)) {  // the router's gap comes just before its choices (model.cpp)
    pending_gap_ = t;
    pending_gap_layer_ = p.index;
    return;
  }
  const int64_t l = ordinal(p.index);
  AVDIT_CHECK(l >= 0, "route recorder: router point of block {}, not a MoE layer", p.index);
  const int64_t R = row_class_.numel();
  if (t.ndim() != 3 || t.size(0) != R || t.size(1) != shape_.heads || t.size(2) != shape_.top_k)
    throw RuntimeFailure(fmt::format(
        "--route-stats: the router of block {} chose {} experts, expected [{}, {}, {}] (rows of "
        "the sampler's layout, heads, top_k)",
        p.index, t.shape_str(), R, shape_.heads, shape_.top_k));
  const int bin = static_cast<int>(int64_t{step_} * kStepBins / steps_);
  if (l == 0)  // one forward: its rows counted once
    for (int k = 0; k < kClasses; ++k)
      rows_[static_cast<size_t>(k * kStepBins + bin)] += class_rows_[k];
  Tensor counts = counts_.select(l), hist = gap_hist_.select(l);
  const Tensor gap = pending_gap_layer_ == p.index ? pending_gap_ : Tensor();
  ops::route_tally(ctx, t, gap, row_class_, bin, gap_edges(), counts, hist);
  pending_gap_ = Tensor();
  pending_gap_layer_ = -1;
  for (const RouteMapPoint& m : map_points_) {
    if (m.layer != p.index || m.step != step_) continue;
    // The one host synchronisation of a map point: its choices, one head.
    const Tensor all = ctx.download(t);
    const int64_t K = shape_.top_k, H = shape_.heads;
    Tensor head = Tensor::empty({R, K}, DType::I32);
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(head.data<int32_t>() + r * K, all.data<int32_t>() + (r * H + m.head) * K,
                  sizeof(int32_t) * K);
    maps_.push_back(RouteMap{m.layer, m.head, m.step, head});
  }
}

RouteStats RouteRecorder::finish(ops::Context& ctx) {
  AVDIT_CHECK(begun_, "route recorder: finish() without begin()");
  begun_ = false;
  RouteStats s;
  s.shape = shape_;
  const int64_t L = shape_.moe_layers(), H = shape_.heads, E = shape_.experts;
  s.counts = ctx.download(counts_).reshape({L, H, kModalities, kPasses, kStepBins, E});
  s.gap_hist = ctx.download(gap_hist_).reshape({L, H, kModalities, kPasses, kGapBins});
  s.rows = Tensor::empty({kModalities, kPasses, kStepBins}, DType::I64);
  std::memcpy(s.rows.data<int64_t>(), rows_.data(), rows_.size() * sizeof(int64_t));
  s.steps = {steps_};
  s.maps = std::move(maps_);
  if (!s.maps.empty()) {
    s.row_class = row_class_host_;
    s.video_grid = video_grid_;
  }
  counts_ = gap_hist_ = row_class_ = Tensor();
  // Every forward's choices were counted: rows x heads x top_k per layer (and a gap per row and
  // head when the router gave them).
  int64_t total_rows = 0;
  for (int64_t v : rows_) total_rows += v;
  const int64_t* n = s.counts.data<int64_t>();
  const int64_t* g = s.gap_hist.data<int64_t>();
  const int64_t per = H * kClasses * kStepBins * E, gper = H * kClasses * kGapBins;
  for (int64_t l = 0; l < L; ++l) {
    int64_t sum = 0, gsum = 0;
    for (int64_t i = 0; i < per; ++i) sum += n[l * per + i];
    for (int64_t i = 0; i < gper; ++i) gsum += g[l * gper + i];
    if (sum != total_rows * H * shape_.top_k || (gsum != 0 && gsum != total_rows * H))
      throw RuntimeFailure(fmt::format(
          "--route-stats: block {} counted {} selections and {} gaps, expected {} and {} ({} rows "
          "over the forwards x {} heads x top {})",
          shape_.layers[l], sum, gsum, total_rows * H * shape_.top_k, total_rows * H, total_rows, H,
          shape_.top_k));
  }
  return s;
}

}  // namespace avdit::analysis::routes
