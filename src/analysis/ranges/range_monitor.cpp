// The fp16 range monitor (see range_monitor.h).
#include "analysis/ranges/range_monitor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"
#include "io/output_file.h"
#include "ops/context.h"
#include "ops/range_stats.h"
#include "score/plot.h"

namespace avdit::analysis::ranges {

namespace {

constexpr const char* kStepPoint = "step.input";   // sample/sampler_loop.h
constexpr const char* kCallPoint = "stack.input";  // models/stack_points.h
constexpr int64_t kPage = 4096;                    // slots per page on the context

std::string plural(int64_t n, const char* noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

std::string margin_str(double m) { return std::isinf(m) ? "inf" : fmt::format("{:.3g}x", m); }

nlohmann::json at_json(const RangeAt& a, bool row) {
  nlohmann::json j{{"step", a.step}, {"call", a.call}, {"block", a.block}, {"site", a.site}};
  if (row) j["row"] = a.row;
  return j;
}

nlohmann::json number(std::optional<double> v) {
  return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

std::vector<RangeSite> h3_range_sites() {
  return {{"qkv", "block{}_qkv"},           {"attn_core", "block{}_attn_core"},
          {"attn_out", "block{}_attn_out"}, {"mlp_up", "block{}_mlp_up"},
          {"mlp_act", "block{}_mlp_act"},   {"mlp_out", "block{}_mlp_out"},
          {"residual", "hidden_block{}"}};
}

std::string RangeAt::str() const {
  std::string s = step >= 0 ? fmt::format("step {}, ", step) : "";
  s += fmt::format("call {}, block {}, {}", call, block, site);
  if (row >= 0) s += fmt::format(", row {}", row);
  return s;
}

std::string RangeSummary::margin_refusal() const {
  if (expected == 0) return "no site seen";
  if (covered < expected) return fmt::format("{} sites not seen", expected - covered);
  if (nonfinite > 0) return fmt::format("{} non-finite values", nonfinite);
  return "";
}

std::optional<double> RangeSummary::margin() const {
  if (!margin_refusal().empty()) return std::nullopt;
  return max_abs > 0 ? kF16Max / max_abs : std::numeric_limits<double>::infinity();
}

std::optional<double> RangeSummary::margin(const SiteRange& s) const {
  if (!full() || s.nonfinite > 0) return std::nullopt;
  return s.max_abs > 0 ? kF16Max / s.max_abs : std::numeric_limits<double>::infinity();
}

RangeMonitor::RangeMonitor(std::vector<RangeSite> sites, int64_t blocks)
    : sites_(std::move(sites)), blocks_(blocks) {
  AVDIT_CHECK(!sites_.empty() && blocks_ >= 1, "range monitor: {} sites, {} blocks", sites_.size(),
              blocks_);
}

bool RangeMonitor::wants(const Point& p) const {
  if (p.is(kCallPoint) || (p.is(kStepPoint) && p.part <= 0)) return true;
  for (const RangeSite& s : sites_)
    if (p.is(s.point)) return true;
  return false;
}

void RangeMonitor::on(ops::Context& ctx, const Point& p, Tensor& t) {
  if (p.is(kStepPoint)) {
    step_ = p.index;
    call_in_step_ = -1;
    return;
  }
  if (p.is(kCallPoint)) {
    calls_.emplace_back(step_, ++call_in_step_);
    return;
  }
  int64_t site = 0;
  while (site < static_cast<int64_t>(sites_.size()) && !p.is(sites_[site].point)) ++site;
  AVDIT_CHECK(!calls_.empty(), "range monitor: {} shown before any {}", p.str(), kCallPoint);
  AVDIT_CHECK(p.index >= 0 && p.index < blocks_, "range monitor: {} of a {}-block model", p.str(),
              blocks_);
  const int64_t k = static_cast<int64_t>(records_.size());
  if (k / kPage >= static_cast<int64_t>(pages_.size()))
    pages_.push_back(ctx.zeros({kPage, ops::kRangeSlotWidth}, DType::F32));
  Tensor slot = pages_[k / kPage].slice_rows(k % kPage, k % kPage + 1);
  // Rows by the first index (H3's qkv is [S, heads, 3, dh]): a non-finite's row is its token's.
  const bool by_first = t.ndim() > 2 && t.size(0) > 0;
  ops::range_stats(ctx, by_first ? t.reshape({t.size(0), t.numel() / t.size(0)}) : t, slot);
  records_.push_back({static_cast<int64_t>(calls_.size()) - 1, p.index, site});
}

RangeSummary RangeMonitor::summary(ops::Context& ctx) {
  const int64_t S = static_cast<int64_t>(sites_.size()), B = blocks_;
  RangeSummary s;
  s.blocks = B;
  s.calls = static_cast<int64_t>(calls_.size());
  s.expected = B * S * s.calls;
  std::set<int64_t> steps;
  for (const auto& [step, call] : calls_) steps.insert(step);
  s.steps = static_cast<int64_t>(steps.size());
  for (const RangeSite& site : sites_) {
    SiteRange r;
    r.site = site.name;
    r.expected = B * s.calls;
    r.max_by_block.assign(static_cast<size_t>(B), 0.0);
    s.sites.push_back(std::move(r));
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.per_call.resize(calls_.size());
  for (size_t c = 0; c < calls_.size(); ++c)
    s.per_call[c] = {calls_[c].first, calls_[c].second, std::vector<double>(B * S, nan)};
  auto at = [&](const Record& r, int64_t row) {
    return RangeAt{calls_[r.call].first, calls_[r.call].second, r.block, row, sites_[r.site].name};
  };
  for (size_t page = 0; page < pages_.size(); ++page) {
    const Tensor host = ctx.download(pages_[page]);
    const float* v = host.f32();
    const int64_t begin = static_cast<int64_t>(page) * kPage;
    const int64_t end = std::min<int64_t>(begin + kPage, static_cast<int64_t>(records_.size()));
    for (int64_t k = begin; k < end; ++k) {
      const Record& r = records_[k];
      const float* slot = v + (k - begin) * ops::kRangeSlotWidth;
      const double m = slot[0];
      const auto count = static_cast<int64_t>(slot[1]);
      double& cell = s.per_call[r.call].max_abs[r.block * S + r.site];
      SiteRange& site = s.sites[r.site];
      if (std::isnan(cell)) {  // a site shown twice in one call counts once
        ++site.seen;
        ++s.covered;
        cell = m;
      }
      cell = std::max(cell, m);
      site.max_by_block[r.block] = std::max(site.max_by_block[r.block], m);
      // The first in the run's order holds a tie.
      if (site.max_at.block < 0 || m > site.max_abs) site.max_abs = m, site.max_at = at(r, -1);
      if (s.max_at.block < 0 || m > s.max_abs) s.max_abs = m, s.max_at = at(r, -1);
      site.nonfinite += count;
      s.nonfinite += count;
      if (count > 0 && !s.first_nonfinite) s.first_nonfinite = at(r, static_cast<int64_t>(slot[2]));
    }
  }
  for (size_t c = 0; c < calls_.size() && !s.first_missing; ++c)
    for (int64_t b = 0; b < B && !s.first_missing; ++b)
      for (int64_t i = 0; i < S && !s.first_missing; ++i)
        if (std::isnan(s.per_call[c].max_abs[b * S + i]))
          s.first_missing = RangeAt{calls_[c].first, calls_[c].second, b, -1, sites_[i].name};
  return s;
}

std::string render_text(const RangeSummary& s) {
  const bool stepped = !s.per_call.empty() && s.per_call.front().step >= 0;
  std::string out =
      fmt::format("range monitor: covered {} of {} sites ({} x {} x {}{})", s.covered, s.expected,
                  plural(s.blocks, "block"), plural(static_cast<int64_t>(s.sites.size()), "site"),
                  plural(s.calls, "call"), stepped ? " over " + plural(s.steps, "step") : "");
  if (s.first_missing)
    out += fmt::format("; {:.1f}% seen, the first not seen: {}",
                       s.expected ? 100.0 * s.covered / s.expected : 0.0, s.first_missing->str());
  const std::string refusal = s.margin_refusal();
  out += refusal.empty() ? fmt::format("\nmargin to fp16's {:.0f}: {} (max |x| {:.4g} at {})",
                                       kF16Max, margin_str(*s.margin()), s.max_abs, s.max_at.str())
                         : fmt::format("\nmargin not stated: {}", refusal);
  out += fmt::format("\n  {:<10} {:>11} {:>9} {:>10}  {}", "site", "max |x|", "margin",
                     "non-finite", s.full() ? "max at" : "max at (of the sites seen)");
  for (const SiteRange& r : s.sites) {
    const std::optional<double> m = s.margin(r);
    out +=
        fmt::format("\n  {:<10} {:>11.4g} {:>9} {:>10}  {}", r.site, r.max_abs,
                    m ? margin_str(*m) : "-", r.nonfinite, r.seen ? r.max_at.str() : "never seen");
  }
  if (s.first_nonfinite)
    out += fmt::format("\nfirst non-finite value: {} ({} in all)", s.first_nonfinite->str(),
                       s.nonfinite);
  else if (s.covered > 0)
    out += "\nno non-finite value in the sites seen";
  return out;
}

nlohmann::json to_json(const RangeSummary& s) {
  nlohmann::json sites = nlohmann::json::array();
  for (const SiteRange& r : s.sites)
    sites.push_back({{"site", r.site},
                     {"seen", r.seen},
                     {"expected", r.expected},
                     {"max_abs", r.max_abs},
                     {"max_at", r.seen ? at_json(r.max_at, false) : nlohmann::json(nullptr)},
                     {"margin", number(s.margin(r))},
                     {"nonfinite", r.nonfinite},
                     {"max_abs_by_block", r.max_by_block}});
  nlohmann::json calls = nlohmann::json::array();
  for (const RangeSummary::Call& c : s.per_call) {
    nlohmann::json m = nlohmann::json::array();
    for (int64_t b = 0; b < s.blocks; ++b) {
      nlohmann::json row = nlohmann::json::array();
      for (size_t i = 0; i < s.sites.size(); ++i) {
        const double v = c.max_abs[b * static_cast<int64_t>(s.sites.size()) + i];
        row.push_back(std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v));
      }
      m.push_back(std::move(row));
    }
    calls.push_back({{"step", c.step}, {"call", c.call}, {"max_abs", std::move(m)}});
  }
  nlohmann::json names = nlohmann::json::array();
  for (const SiteRange& r : s.sites) names.push_back(r.site);
  return {{"coverage", fmt::format("covered {} of {} sites", s.covered, s.expected)},
          {"covered", s.covered},
          {"expected", s.expected},
          {"blocks", s.blocks},
          {"site_kinds", names},
          {"calls", s.calls},
          {"steps", s.steps},
          {"fp16_max", kF16Max},
          {"margin", number(s.margin())},
          {"margin_refused", s.margin_refusal().empty() ? nlohmann::json(nullptr)
                                                        : nlohmann::json(s.margin_refusal())},
          {"max_abs", s.max_abs},
          {"max_at", s.covered ? at_json(s.max_at, false) : nlohmann::json(nullptr)},
          {"nonfinite", s.nonfinite},
          {"first_nonfinite",
           s.first_nonfinite ? at_json(*s.first_nonfinite, true) : nlohmann::json(nullptr)},
          {"first_not_seen",
           s.first_missing ? at_json(*s.first_missing, false) : nlohmann::json(nullptr)},
          {"sites", std::move(sites)},
          {"per_call", std::move(calls)}};
}

void write_range_json(const std::string& path, const RangeSummary& s) {
  write_file_atomic(path, to_json(s).dump(1) + "\n");
}

bool write_range_png(const std::string& path, const RangeSummary& s) {
  if (!score::can_write_png()) return false;
  score::Panel panel;
  // The plot's font has no '|'.
  panel.title = fmt::format("max abs(x) by block over {} ({} of {} sites seen)",
                            plural(s.calls, "call"), s.covered, s.expected);
  panel.log_y = true;
  panel.x_label = "block";
  panel.x_first = 0;
  for (const SiteRange& r : s.sites) panel.series.push_back({r.site, r.max_by_block});
  panel.series.push_back(
      {"fp16 max 65504", std::vector<double>(static_cast<size_t>(s.blocks), kF16Max)});
  score::write_png_file(
      path, score::draw_line_plot({panel}),
      fmt::format("avdit range monitor: max |x| over the finite values of each "
                  "site kind by block (0..{}), log y axis; the flat series is "
                  "fp16's largest finite value, 65504. {}",
                  s.blocks - 1, fmt::format("covered {} of {} sites", s.covered, s.expected)));
  return true;
}

}  // namespace avdit::analysis::ranges
