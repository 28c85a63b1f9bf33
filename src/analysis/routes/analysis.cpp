// The router statistics report (see analysis.h).
#include "analysis/routes/analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "analysis/routes/mask.h"
#include "core/error.h"

namespace avdit::analysis::routes {
namespace {

using Vec = std::vector<int64_t>;

// The selections of (l, h) summed over everything but what `keep` selects: keep(m, p, b) says
// whether a (modality, pass, bin) slice counts.
template <class Keep>
Vec experts_of(const RouteStats& s, int64_t l, int64_t h, Keep keep) {
  const int64_t E = s.shape.experts;
  Vec v(E, 0);
  const int64_t* c = s.counts.data<int64_t>();
  for (int m = 0; m < kModalities; ++m)
    for (int p = 0; p < kPasses; ++p)
      for (int b = 0; b < kStepBins; ++b) {
        if (!keep(m, p, b)) continue;
        const int64_t* row = c + s.count_index(l, h, m, p, b, 0);
        for (int64_t e = 0; e < E; ++e) v[e] += row[e];
      }
  return v;
}

int64_t sum(const Vec& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

double effective_experts(const Vec& v) {
  const int64_t n = sum(v);
  if (n == 0) return 0.0;
  double h = 0;
  for (int64_t x : v)
    if (x > 0) {
      const double p = static_cast<double>(x) / static_cast<double>(n);
      h -= p * std::log(p);
    }
  return std::exp(h);
}

std::optional<double> cosine(const Vec& a, const Vec& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    aa += static_cast<double>(a[i]) * static_cast<double>(a[i]);
    bb += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  if (aa == 0 || bb == 0) return std::nullopt;
  return ab / std::sqrt(aa * bb);
}

// Experts by count, largest first, ties to the lower index.
std::vector<int64_t> by_count(const Vec& v) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[a] > v[b]; });
  return order;
}

// The smallest prefix of by_count holding >= 90% of the total.
std::vector<int64_t> high_mass_set(const Vec& v) {
  const int64_t total = sum(v);
  std::vector<int64_t> set;
  if (total == 0) return set;
  int64_t held = 0;
  for (int64_t e : by_count(v)) {
    if (held * 10 >= total * 9) break;  // 90%, in integers
    set.push_back(e);
    held += v[e];
  }
  std::sort(set.begin(), set.end());
  return set;
}

std::optional<double> jaccard(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.empty() || b.empty()) return std::nullopt;
  std::vector<int64_t> both, any;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(any));
  return static_cast<double>(both.size()) / static_cast<double>(any.size());
}

// Mean of the defined values; nullopt when none is.
struct Mean {
  double total = 0;
  int64_t n = 0;
  void add(std::optional<double> v) {
    if (v) total += *v, ++n;
  }
  std::optional<double> get() const {
    return n ? std::optional<double>(total / static_cast<double>(n)) : std::nullopt;
  }
};

std::vector<Pair> dead_pairs(const RouteStats& s) {
  std::vector<Pair> out;
  for (int64_t l = 0; l < s.shape.moe_layers(); ++l)
    for (int64_t h = 0; h < s.shape.heads; ++h) {
      const Vec v = experts_of(s, l, h, [](int, int, int) { return true; });
      for (int64_t e = 0; e < s.shape.experts; ++e)
        if (v[e] == 0) out.push_back({s.shape.layers[l], h, e});
    }
  return out;
}

nlohmann::json opt(std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

std::string fmt_opt(std::optional<double> v, const char* spec = "{:.3f}") {
  return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
}

}  // namespace

RouteAnalysis analyze_routes(const std::vector<RouteStats>& files,
                             const std::vector<std::string>& names) {
  const RouteStats s = merge_route_stats(files, names);  // BadInput on different shapes
  RouteAnalysis a;
  a.shape = s.shape;
  a.files = names;
  a.runs = s.runs();
  const int64_t L = s.shape.moe_layers(), H = s.shape.heads, E = s.shape.experts;

  // Dead pairs: per file, union, intersection (the pairs dead in the sum).
  std::vector<Pair> uni;
  for (const RouteStats& f : files) {
    a.dead_per_file.push_back(dead_pairs(f));
    uni.insert(uni.end(), a.dead_per_file.back().begin(), a.dead_per_file.back().end());
  }
  std::sort(uni.begin(), uni.end());
  uni.erase(std::unique(uni.begin(), uni.end()), uni.end());
  a.dead_union = uni;
  a.dead_all = dead_pairs(s);

  // The first and last step bins that saw rows.
  const int64_t* rows = s.rows.data<int64_t>();
  for (int b = 0; b < kStepBins; ++b) {
    int64_t n = 0;
    for (int k = 0; k < kClasses; ++k) n += rows[k * kStepBins + b];
    if (n == 0) continue;
    if (a.early_bin < 0) a.early_bin = b;
    a.late_bin = b;
  }

  for (auto& e : a.effective) e.assign(L, std::vector<double>(H, 0.0));
  for (auto& m : a.high_mass) m.assign(L, std::vector<std::vector<int64_t>>(H));
  for (auto& c : a.coverage_by_layer) c.assign(L, 0.0);
  std::array<Mean, 3> jac;
  std::array<Mean, 2> cov;
  Mean early_late, cond_uncond;
  std::array<std::array<std::array<int64_t, kModalities>, 2>, 2> kept{};
  std::array<int64_t, kModalities> modality_total{};
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      const Vec all = experts_of(s, l, h, [](int, int, int) { return true; });
      a.effective[0][l][h] = effective_experts(all);
      std::array<Vec, kModalities> mod;
      for (int m = 0; m < kModalities; ++m) {
        mod[m] = experts_of(s, l, h, [m](int mm, int, int) { return mm == m; });
        a.effective[1 + m][l][h] = effective_experts(mod[m]);
        a.high_mass[m][l][h] = high_mass_set(mod[m]);
        modality_total[m] += sum(mod[m]);
      }
      jac[0].add(jaccard(a.high_mass[0][l][h], a.high_mass[1][l][h]));
      jac[1].add(jaccard(a.high_mass[0][l][h], a.high_mass[2][l][h]));
      jac[2].add(jaccard(a.high_mass[1][l][h], a.high_mass[2][l][h]));
      const int64_t total = sum(all);
      const std::vector<int64_t> order = by_count(all);
      for (int i = 0; i < 2; ++i) {
        const int64_t n = std::min(kCoverageTops[i], E);
        int64_t held = 0;
        for (int64_t j = 0; j < n; ++j) held += all[order[j]];
        const double share = total ? static_cast<double>(held) / static_cast<double>(total) : 0.0;
        cov[i].add(share);
        a.coverage_by_layer[i][l] += share / static_cast<double>(H);
      }
      for (int r = 0; r < 2; ++r) {
        const std::vector<int64_t> ranked =
            rank_experts(s, l, h, r == 0 ? KeepRule::Global : KeepRule::Modality);
        for (int i = 0; i < 2; ++i) {
          const int64_t n = std::min(kCoverageTops[i], E);
          for (int m = 0; m < kModalities; ++m)
            for (int64_t j = 0; j < n; ++j) kept[r][i][m] += mod[m][ranked[j]];
        }
      }
      if (a.early_bin >= 0 && a.early_bin != a.late_bin) {
        const int eb = a.early_bin, lb = a.late_bin;
        early_late.add(cosine(experts_of(s, l, h, [eb](int, int, int b) { return b == eb; }),
                              experts_of(s, l, h, [lb](int, int, int b) { return b == lb; })));
      }
      cond_uncond.add(cosine(experts_of(s, l, h, [](int, int p, int) { return p == 0; }),
                             experts_of(s, l, h, [](int, int p, int) { return p == 1; })));
    }
  for (int i = 0; i < 2; ++i) a.coverage[i] = cov[i].get().value_or(0.0);
  for (int i = 0; i < 3; ++i) a.jaccard[i] = jac[i].get();
  for (int m = 0; m < kModalities; ++m) {
    Mean size;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h)
        if (!a.high_mass[m][l][h].empty())
          size.add(static_cast<double>(a.high_mass[m][l][h].size()));
    a.high_mass_size[m] = size.get().value_or(0.0);
  }
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 2; ++i)
      for (int m = 0; m < kModalities; ++m)
        if (modality_total[m] > 0)
          a.kept_share[r][i][m] =
              static_cast<double>(kept[r][i][m]) / static_cast<double>(modality_total[m]);
  a.early_late_cosine = early_late.get();
  a.cond_uncond_cosine = cond_uncond.get();

  // Gap CDF: bins below the edge 1e-3 (1e-2) hold the gaps under it.
  const int64_t* g = s.gap_hist.data<int64_t>();
  std::array<int64_t, 2> below{};
  for (int64_t i = 0; i < s.gap_hist.numel(); ++i) {
    const int bin = static_cast<int>(i % kGapBins);
    a.gaps += g[i];
    if (bin <= gap_edge_of_power(-3)) below[0] += g[i];
    if (bin <= gap_edge_of_power(-2)) below[1] += g[i];
  }
  for (int i = 0; i < 2; ++i)
    a.gap_cdf[i] = a.gaps ? static_cast<double>(below[i]) / static_cast<double>(a.gaps) : 0.0;
  return a;
}

nlohmann::json routes_json(const RouteAnalysis& a) {
  using nlohmann::json;
  auto pairs = [](const std::vector<Pair>& v) {
    json j = json::array();
    for (const Pair& p : v) j.push_back({p[0], p[1], p[2]});
    return j;
  };
  json j;
  j["shape"] = {{"layers", a.shape.layers},
                {"heads", a.shape.heads},
                {"experts", a.shape.experts},
                {"top_k", a.shape.top_k}};
  j["files"] = a.files;
  j["runs"] = a.runs;
  j["dead_pairs"] = pairs(a.dead_all);
  j["dead_pairs_union"] = pairs(a.dead_union);
  json per = json::array();
  for (const auto& d : a.dead_per_file) per.push_back(pairs(d));
  j["dead_pairs_per_file"] = per;
  j["effective_experts"] = {{"all", a.effective[0]},
                            {"video", a.effective[1]},
                            {"audio", a.effective[2]},
                            {"text", a.effective[3]}};
  j["coverage_top128"] = a.coverage[0];
  j["coverage_top192"] = a.coverage[1];
  j["coverage_by_layer"] = {{"top128", a.coverage_by_layer[0]}, {"top192", a.coverage_by_layer[1]}};
  j["high_mass"] = {
      {"definition",
       "per (layer, head), the smallest set of experts holding at least 90% of the modality's "
       "selections (largest counts first, ties to the lower expert index)"},
      {"sets", {{"video", a.high_mass[0]}, {"audio", a.high_mass[1]}, {"text", a.high_mass[2]}}},
      {"mean_size",
       {{"video", a.high_mass_size[0]},
        {"audio", a.high_mass_size[1]},
        {"text", a.high_mass_size[2]}}},
      {"jaccard",
       {{"video_audio", opt(a.jaccard[0])},
        {"video_text", opt(a.jaccard[1])},
        {"audio_text", opt(a.jaccard[2])}}}};
  json kept;
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 2; ++i)
      for (int m = 0; m < kModalities; ++m)
        kept[r == 0 ? "global" : "modality"][std::to_string(kCoverageTops[i])][kModalityNames[m]] =
            opt(a.kept_share[r][i][m]);
  j["kept_share"] = kept;
  j["gap_cdf"] = {{"1e-3", a.gap_cdf[0]}, {"1e-2", a.gap_cdf[1]}};
  j["cond_uncond_cosine"] = opt(a.cond_uncond_cosine);
  j["early_late_cosine"] = opt(a.early_late_cosine);
  j["early_late_bins"] = {a.early_bin, a.late_bin};
  return j;
}

std::string routes_markdown(const RouteAnalysis& a) {
  std::string s;
  s += fmt::format("# Router statistics: {} run(s), {}\n\n", a.runs, a.shape.str());
  const int64_t pairs = a.shape.moe_layers() * a.shape.heads * a.shape.experts;
  s += "| measure | value |\n| --- | --- |\n";
  s += fmt::format("| never-selected (layer, head, expert) pairs, all runs | {} of {} |\n",
                   a.dead_all.size(), pairs);
  for (size_t i = 0; i < a.dead_per_file.size(); ++i)
    s += fmt::format("| never selected in {} | {} |\n", a.files[i], a.dead_per_file[i].size());
  s += fmt::format("| never selected in some file (union) | {} |\n", a.dead_union.size());
  auto mean = [](const std::vector<std::vector<double>>& v) {
    double t = 0;
    int64_t n = 0;
    for (const auto& row : v)
      for (double x : row)
        if (x > 0) t += x, ++n;
    return n ? t / static_cast<double>(n) : 0.0;
  };
  s += fmt::format(
      "| effective experts per head, exp(entropy) (all / video / audio / text) | {:.1f} / {:.1f} "
      "/ {:.1f} / {:.1f} |\n",
      mean(a.effective[0]), mean(a.effective[1]), mean(a.effective[2]), mean(a.effective[3]));
  s += fmt::format(
      "| selections held by the top 128 / 192 experts of a head | {:.1f}% / {:.1f}% |\n",
      100 * a.coverage[0], 100 * a.coverage[1]);
  s += fmt::format(
      "| high-mass set size (video / audio / text; smallest set with 90% of a modality's "
      "selections) | {:.1f} / {:.1f} / {:.1f} |\n",
      a.high_mass_size[0], a.high_mass_size[1], a.high_mass_size[2]);
  s += fmt::format(
      "| Jaccard of high-mass sets (video-audio / video-text / audio-text) | {} / {} / {} |\n",
      fmt_opt(a.jaccard[0]), fmt_opt(a.jaccard[1]), fmt_opt(a.jaccard[2]));
  for (int i = 0; i < 2; ++i)
    for (int r = 0; r < 2; ++r)
      s += fmt::format("| share kept by a {} top-{} (video / audio / text) | {} / {} / {} |\n",
                       r == 0 ? "global" : "modality-aware", kCoverageTops[i],
                       fmt_opt(a.kept_share[r][i][0]), fmt_opt(a.kept_share[r][i][1]),
                       fmt_opt(a.kept_share[r][i][2]));
  s += fmt::format("| cosine of step bins {} vs {} (utilisation per head, mean) | {} |\n",
                   a.early_bin, a.late_bin, fmt_opt(a.early_late_cosine));
  s += fmt::format("| cosine of cond vs uncond utilisation (per head, mean) | {} |\n",
                   fmt_opt(a.cond_uncond_cosine));
  s += fmt::format("| K-th vs (K+1)-th score gap below 1e-3 / 1e-2 | {:.1f}% / {:.1f}% |\n",
                   100 * a.gap_cdf[0], 100 * a.gap_cdf[1]);
  s += "\n| layer | effective experts (mean over heads) | video | audio | text | top-128 coverage "
       "|\n";
  s += "| ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (int64_t l = 0; l < a.shape.moe_layers(); ++l) {
    std::array<double, 4> m{};
    for (int k = 0; k < 4; ++k)
      for (double x : a.effective[k][l]) m[k] += x / static_cast<double>(a.shape.heads);
    s += fmt::format("| {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f}% |\n", a.shape.layers[l],
                     m[0], m[1], m[2], m[3], 100 * a.coverage_by_layer[0][l]);
  }
  return s;
}

}  // namespace avdit::analysis::routes
