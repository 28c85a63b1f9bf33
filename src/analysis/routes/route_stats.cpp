// The router statistics file (see route_stats.h). One safetensors file:
//   counts    I64 [L, H, 3, 2, 10, E]   selections by MoE layer, head, modality, pass, step bin,
//   expert gap_hist  I64 [L, H, 3, 2, 62]      (row, head) pairs by the K-th - (K+1)-th biased
//   score gap rows      I64 [3, 2, 10]            rows per modality, pass and step bin, summed over
//   forwards layers    I64 [L]                   block index of each MoE layer steps     I64 [runs]
//   step count of each run summed here gap_edges F32 [61]                  the histogram's edges
//   (checked on reading) map.LAYER.HEAD.STEP I32 [rows, K], row_class I32 [rows], video_grid I64
//   [3]: route maps
// metadata: format "avdit.route_stats", version "1", heads, experts, top_k.
#include "analysis/routes/route_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>

#include "core/error.h"
#include "io/safetensors.h"

namespace avdit::analysis::routes {
namespace {

constexpr const char* kFormat = "avdit.route_stats";
constexpr const char* kVersion = "1";

Tensor i64_vector(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I64);
  if (!v.empty()) std::memcpy(t.data<int64_t>(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

std::vector<int64_t> to_vector(const Tensor& t) {
  const int64_t* p = t.data<int64_t>();
  return std::vector<int64_t>(p, p + t.numel());
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i ? "," : "", v[i]);
  return s;
}

int64_t meta_int(const std::map<std::string, std::string>& meta, const std::string& key,
                 const std::string& file) {
  auto it = meta.find(key);
  AVDIT_REQUIRE(it != meta.end(), "{}: router statistics without the metadata field '{}'", file,
                key);
  int64_t v = 0;
  const std::string& s = it->second;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  AVDIT_REQUIRE(ec == std::errc() && end == s.data() + s.size() && v > 0 && v <= (1 << 20),
                "{}: metadata field '{}' = '{}' is not a positive integer", file, key, s);
  return v;
}

// A tensor of the file with the given dtype and shape, as an owned copy (the mapping may be
// read-only and the merge adds into it).
Tensor require(const SafetensorsFile& f, const std::string& name, DType dtype, const Shape& shape) {
  const std::string file = f.path().string();
  const TensorInfo* info = f.find(name);
  AVDIT_REQUIRE(info != nullptr, "{}: router statistics without the tensor '{}'", file, name);
  AVDIT_REQUIRE(info->dtype == dtype && info->shape == shape,
                "{}: tensor {} is {} {}, expected {} {} (from the file's heads, experts, top_k "
                "and layers)",
                file, name, dtype_name(info->dtype), shape_str(info->shape), dtype_name(dtype),
                shape_str(shape));
  return f.get(name).clone();
}

}  // namespace

const std::vector<float>& gap_edges() {
  static const std::vector<float> edges = [] {
    std::vector<float> e(kGapEdges);
    for (int i = 0; i < kGapEdges; ++i)
      e[i] = static_cast<float>(std::pow(10.0, -6.0 + static_cast<double>(i) / 10.0));
    return e;
  }();
  return edges;
}

std::string RouteShape::str() const {
  return fmt::format("MoE layers {} x {} heads x {} experts, top {}", join(layers), heads, experts,
                     top_k);
}

RouteStats RouteStats::zeros(const RouteShape& s) {
  RouteStats r;
  r.shape = s;
  const int64_t L = s.moe_layers();
  r.counts = Tensor::zeros({L, s.heads, kModalities, kPasses, kStepBins, s.experts}, DType::I64);
  r.gap_hist = Tensor::zeros({L, s.heads, kModalities, kPasses, kGapBins}, DType::I64);
  r.rows = Tensor::zeros({kModalities, kPasses, kStepBins}, DType::I64);
  return r;
}

int64_t RouteStats::count_index(int64_t l, int64_t h, int m, int p, int b, int64_t e) const {
  return ((((l * shape.heads + h) * kModalities + m) * kPasses + p) * kStepBins + b) *
             shape.experts +
         e;
}

int64_t RouteStats::gap_index(int64_t l, int64_t h, int m, int p, int g) const {
  return (((l * shape.heads + h) * kModalities + m) * kPasses + p) * kGapBins + g;
}

namespace {

std::vector<std::pair<std::string, Tensor>> stats_tensors(const RouteStats& s) {
  std::vector<std::pair<std::string, Tensor>> t = {
      {"counts", s.counts},
      {"gap_hist", s.gap_hist},
      {"rows", s.rows},
      {"layers", i64_vector(s.shape.layers)},
      {"steps", i64_vector(s.steps)},
      {"gap_edges", Tensor::from_floats(gap_edges(), {kGapEdges})}};
  if (!s.maps.empty()) {
    for (const RouteMap& m : s.maps)
      t.emplace_back(fmt::format("map.{}.{}.{}", m.layer, m.head, m.step), m.experts);
    t.emplace_back("row_class", s.row_class);
    t.emplace_back("video_grid", i64_vector({s.video_grid[0], s.video_grid[1], s.video_grid[2]}));
  }
  return t;
}

std::map<std::string, std::string> stats_metadata(const RouteStats& s) {
  return {{"format", kFormat},
          {"version", kVersion},
          {"heads", std::to_string(s.shape.heads)},
          {"experts", std::to_string(s.shape.experts)},
          {"top_k", std::to_string(s.shape.top_k)}};
}

}  // namespace

void write_route_stats(const std::filesystem::path& path, const RouteStats& s) {
  write_safetensors(path, stats_tensors(s), stats_metadata(s));
}

void write_route_stats(OutputFile& out, const RouteStats& s) {
  write_safetensors(out, stats_tensors(s), stats_metadata(s));
}

RouteStats read_route_stats(const std::filesystem::path& path) {
  const std::string file = path.string();
  const auto f = SafetensorsFile::open(path);
  const auto& meta = f->metadata();
  auto fmt_it = meta.find("format");
  AVDIT_REQUIRE(fmt_it != meta.end() && fmt_it->second == kFormat,
                "{}: not a router statistics file (metadata format '{}' expected; write one with "
                "avdit generate --route-stats)",
                file, kFormat);
  auto ver = meta.find("version");
  AVDIT_REQUIRE(ver != meta.end() && ver->second == kVersion,
                "{}: router statistics version '{}', this avdit reads version {}", file,
                ver == meta.end() ? "" : ver->second, kVersion);
  RouteStats s;
  s.shape.heads = meta_int(meta, "heads", file);
  s.shape.experts = meta_int(meta, "experts", file);
  s.shape.top_k = meta_int(meta, "top_k", file);
  AVDIT_REQUIRE(s.shape.top_k <= s.shape.experts, "{}: top_k {} of {} experts", file, s.shape.top_k,
                s.shape.experts);
  const TensorInfo* li = f->find("layers");
  AVDIT_REQUIRE(li && li->dtype == DType::I64 && li->shape.size() == 1 && li->shape[0] >= 1,
                "{}: tensor 'layers' must be I64 [MoE layers]", file);
  s.shape.layers = to_vector(f->get("layers"));
  for (size_t i = 0; i < s.shape.layers.size(); ++i)
    AVDIT_REQUIRE(s.shape.layers[i] >= 0 && (i == 0 || s.shape.layers[i] > s.shape.layers[i - 1]),
                  "{}: tensor 'layers' must hold ascending block indices, found {}", file,
                  join(s.shape.layers));
  const int64_t L = s.shape.moe_layers(), H = s.shape.heads, E = s.shape.experts;
  s.counts = require(*f, "counts", DType::I64, {L, H, kModalities, kPasses, kStepBins, E});
  s.gap_hist = require(*f, "gap_hist", DType::I64, {L, H, kModalities, kPasses, kGapBins});
  s.rows = require(*f, "rows", DType::I64, {kModalities, kPasses, kStepBins});
  const TensorInfo* si = f->find("steps");
  AVDIT_REQUIRE(si && si->dtype == DType::I64 && si->shape.size() == 1 && si->shape[0] >= 1,
                "{}: tensor 'steps' must be I64 [runs]", file);
  s.steps = to_vector(f->get("steps"));
  for (int64_t n : s.steps)
    AVDIT_REQUIRE(n >= 1, "{}: tensor 'steps' holds a step count of {}", file, n);
  const Tensor edges = require(*f, "gap_edges", DType::F32, {kGapEdges});
  AVDIT_REQUIRE(std::memcmp(edges.f32(), gap_edges().data(), sizeof(float) * kGapEdges) == 0,
                "{}: the gap histogram's edges differ from this avdit's (10^(-6 + i/10))", file);

  // Consistency: non-negative integers, every layer's selections = rows x heads x top_k, its gap
  // pairs = rows x heads (or none recorded).
  const int64_t* rows = s.rows.data<int64_t>();
  int64_t total_rows = 0;
  for (int64_t i = 0; i < s.rows.numel(); ++i) {
    AVDIT_REQUIRE(rows[i] >= 0 && rows[i] <= (int64_t{1} << 50),
                  "{}: tensor 'rows' holds {} (a row count)", file, rows[i]);
    total_rows += rows[i];
  }
  const int64_t* n = s.counts.data<int64_t>();
  const int64_t* g = s.gap_hist.data<int64_t>();
  const int64_t per_layer = H * kClasses * kStepBins * E, gap_per_layer = H * kClasses * kGapBins;
  for (int64_t l = 0; l < L; ++l) {
    int64_t sum = 0, gap_sum = 0;
    for (int64_t i = 0; i < per_layer; ++i) {
      const int64_t v = n[l * per_layer + i];
      AVDIT_REQUIRE(v >= 0 && v <= (int64_t{1} << 50), "{}: tensor 'counts' holds {}", file, v);
      sum += v;
    }
    for (int64_t i = 0; i < gap_per_layer; ++i) {
      const int64_t v = g[l * gap_per_layer + i];
      AVDIT_REQUIRE(v >= 0 && v <= (int64_t{1} << 50), "{}: tensor 'gap_hist' holds {}", file, v);
      gap_sum += v;
    }
    AVDIT_REQUIRE(sum == total_rows * H * s.shape.top_k,
                  "{}: layer {} counts {} selections, but {} rows x {} heads x top {} make {}",
                  file, s.shape.layers[l], sum, total_rows, H, s.shape.top_k,
                  total_rows * H * s.shape.top_k);
    AVDIT_REQUIRE(gap_sum == 0 || gap_sum == total_rows * H,
                  "{}: layer {} holds {} gaps, but {} rows x {} heads make {}", file,
                  s.shape.layers[l], gap_sum, total_rows, H, total_rows * H);
  }

  // Route maps (optional).
  for (const TensorInfo& info : f->tensors()) {
    if (!info.name.starts_with("map.")) continue;
    RouteMap m;
    AVDIT_REQUIRE(
        std::sscanf(info.name.c_str(), "map.%ld.%ld.%ld", &m.layer, &m.head, &m.step) == 3 &&
            info.name == fmt::format("map.{}.{}.{}", m.layer, m.head, m.step),
        "{}: tensor {} is not named map.LAYER.HEAD.STEP", file, info.name);
    AVDIT_REQUIRE(
        std::find(s.shape.layers.begin(), s.shape.layers.end(), m.layer) != s.shape.layers.end() &&
            m.head >= 0 && m.head < H && m.step >= 0 && m.step < s.steps.front(),
        "{}: route map {} is outside the statistics ({}, {} steps)", file, info.name, s.shape.str(),
        s.steps.front());
    AVDIT_REQUIRE(
        info.dtype == DType::I32 && info.shape.size() == 2 && info.shape[1] == s.shape.top_k,
        "{}: route map {} is {} {}, expected I32 [rows, {}]", file, info.name,
        dtype_name(info.dtype), shape_str(info.shape), s.shape.top_k);
    m.experts = f->get(info.name).clone();
    s.maps.push_back(std::move(m));
  }
  if (!s.maps.empty()) {
    const int64_t R = s.maps.front().experts.size(0);
    s.row_class = require(*f, "row_class", DType::I32, {R});
    const Tensor grid = require(*f, "video_grid", DType::I64, {3});
    for (int i = 0; i < 3; ++i) s.video_grid[i] = grid.data<int64_t>()[i];
    for (const RouteMap& m : s.maps)
      AVDIT_REQUIRE(m.experts.size(0) == R, "{}: route maps of {} and {} rows", file, R,
                    m.experts.size(0));
    const int32_t* rc = s.row_class.data<int32_t>();
    for (int64_t r = 0; r < R; ++r)
      AVDIT_REQUIRE(rc[r] >= 0 && rc[r] < kClasses, "{}: row_class[{}] = {} (0 to {})", file, r,
                    rc[r], kClasses - 1);
  }
  return s;
}

RouteStats merge_route_stats(const std::vector<RouteStats>& runs,
                             const std::vector<std::string>& names) {
  AVDIT_CHECK(!runs.empty() && names.size() == runs.size(), "merge: {} runs, {} names", runs.size(),
              names.size());
  if (runs.size() == 1) return runs.front();
  RouteStats out = RouteStats::zeros(runs.front().shape);
  for (size_t i = 0; i < runs.size(); ++i) {
    const RouteStats& r = runs[i];
    AVDIT_REQUIRE(r.shape == out.shape,
                  "{}: router statistics of another model ({}) than {} ({}); merge statistics "
                  "of one config",
                  names[i], r.shape.str(), names.front(), out.shape.str());
    for (auto [dst, src] : {std::pair{&out.counts, &r.counts},
                            std::pair{&out.gap_hist, &r.gap_hist}, std::pair{&out.rows, &r.rows}}) {
      int64_t* d = dst->data<int64_t>();
      const int64_t* s = src->data<int64_t>();
      for (int64_t j = 0; j < dst->numel(); ++j) d[j] += s[j];
    }
    out.steps.insert(out.steps.end(), r.steps.begin(), r.steps.end());
  }
  return out;
}

}  // namespace avdit::analysis::routes
