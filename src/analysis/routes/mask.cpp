// Expert masks (see mask.h).
#include "analysis/routes/mask.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <numeric>

#include "core/error.h"
#include "io/safetensors.h"

namespace avdit::analysis::routes {
namespace {

constexpr const char* kFormat = "avdit.expert_mask";
constexpr const char* kVersion = "1";

std::string meta_str(const std::map<std::string, std::string>& meta, const std::string& key,
                     const std::string& file) {
  auto it = meta.find(key);
  AVDIT_REQUIRE(it != meta.end(), "{}: expert mask without the metadata field '{}'", file, key);
  return it->second;
}

int64_t meta_int(const std::map<std::string, std::string>& meta, const std::string& key,
                 const std::string& file) {
  const std::string s = meta_str(meta, key, file);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  AVDIT_REQUIRE(ec == std::errc() && end == s.data() + s.size() && v > 0 && v <= (1 << 20),
                "{}: metadata field '{}' = '{}' is not a positive integer", file, key, s);
  return v;
}

// An expert's selections of (l, h), over modalities, passes and bins: [modality][expert].
std::vector<std::vector<int64_t>> by_modality(const RouteStats& s, int64_t l, int64_t h) {
  const int64_t E = s.shape.experts;
  std::vector<std::vector<int64_t>> n(kModalities, std::vector<int64_t>(E, 0));
  const int64_t* c = s.counts.data<int64_t>();
  for (int m = 0; m < kModalities; ++m)
    for (int p = 0; p < kPasses; ++p)
      for (int b = 0; b < kStepBins; ++b) {
        const int64_t* row = c + s.count_index(l, h, m, p, b, 0);
        for (int64_t e = 0; e < E; ++e) n[m][e] += row[e];
      }
  return n;
}

}  // namespace

KeepRule parse_keep_rule(const std::string& name) {
  if (name == "global") return KeepRule::Global;
  if (name == "modality") return KeepRule::Modality;
  throw BadInput(fmt::format("--rule {}: expected global or modality", name));
}

const char* keep_rule_name(KeepRule rule) {
  return rule == KeepRule::Global ? "global" : "modality";
}

std::vector<int64_t> rank_experts(const RouteStats& s, int64_t l, int64_t h, KeepRule rule) {
  const int64_t E = s.shape.experts;
  const auto n = by_modality(s, l, h);
  std::vector<int64_t> total(E, 0);
  for (int m = 0; m < kModalities; ++m)
    for (int64_t e = 0; e < E; ++e) total[e] += n[m][e];
  // The modality rule's score: the largest share of one modality's selections, compared exactly
  // as fractions a / b (cross-multiplied in 128 bits), so that the order is the same everywhere.
  struct Share {
    int64_t num = 0, den = 1;
  };
  std::vector<Share> share(E);
  if (rule == KeepRule::Modality)
    for (int m = 0; m < kModalities; ++m) {
      int64_t sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += n[m][e];
      if (sum == 0) continue;
      for (int64_t e = 0; e < E; ++e) {
        const Share cand{n[m][e], sum};
        if (static_cast<__int128>(cand.num) * share[e].den >
            static_cast<__int128>(share[e].num) * cand.den)
          share[e] = cand;
      }
    }
  std::vector<int64_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (rule == KeepRule::Modality) {
      const __int128 x = static_cast<__int128>(share[a].num) * share[b].den,
                     y = static_cast<__int128>(share[b].num) * share[a].den;
      if (x != y) return x > y;
    }
    return total[a] > total[b];  // stable: equal totals keep the lower index first
  });
  return order;
}

ExpertMask make_expert_mask(const RouteStats& s, int64_t keep, KeepRule rule) {
  const RouteShape& sh = s.shape;
  AVDIT_REQUIRE(keep >= sh.top_k && keep <= sh.experts,
                "--keep {}: expected {} (top_k) to {} (the experts of a head)", keep, sh.top_k,
                sh.experts);
  ExpertMask mask;
  mask.shape = sh;
  mask.rule = rule;
  mask.kept = keep;
  const int64_t L = sh.moe_layers(), H = sh.heads, E = sh.experts;
  mask.keep = Tensor::zeros({L, H, E}, DType::U8);
  uint8_t* k = mask.keep.data<uint8_t>();
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      const std::vector<int64_t> order = rank_experts(s, l, h, rule);
      for (int64_t i = 0; i < keep; ++i) k[(l * H + h) * E + order[i]] = 1;
    }
  return mask;
}

void write_expert_mask(const std::filesystem::path& path, const ExpertMask& m) {
  Tensor layers = Tensor::empty({m.shape.moe_layers()}, DType::I64);
  std::copy(m.shape.layers.begin(), m.shape.layers.end(), layers.data<int64_t>());
  const std::map<std::string, std::string> meta = {{"format", kFormat},
                                                   {"version", kVersion},
                                                   {"heads", std::to_string(m.shape.heads)},
                                                   {"experts", std::to_string(m.shape.experts)},
                                                   {"top_k", std::to_string(m.shape.top_k)},
                                                   {"rule", keep_rule_name(m.rule)},
                                                   {"kept", std::to_string(m.kept)}};
  write_safetensors(
      path, std::vector<std::pair<std::string, Tensor>>{{"keep", m.keep}, {"layers", layers}},
      meta);
}

ExpertMask read_expert_mask(const std::filesystem::path& path) {
  const std::string file = path.string();
  const auto f = SafetensorsFile::open(path);
  const auto& meta = f->metadata();
  auto it = meta.find("format");
  AVDIT_REQUIRE(it != meta.end() && it->second == kFormat,
                "{}: not an expert mask (metadata format '{}' expected; write one with avdit "
                "routes mask)",
                file, kFormat);
  AVDIT_REQUIRE(meta_str(meta, "version", file) == kVersion,
                "{}: expert mask version '{}', this avdit reads version {}", file,
                meta_str(meta, "version", file), kVersion);
  ExpertMask m;
  m.shape.heads = meta_int(meta, "heads", file);
  m.shape.experts = meta_int(meta, "experts", file);
  m.shape.top_k = meta_int(meta, "top_k", file);
  m.rule = parse_keep_rule(meta_str(meta, "rule", file));
  m.kept = meta_int(meta, "kept", file);
  const TensorInfo* li = f->find("layers");
  AVDIT_REQUIRE(li && li->dtype == DType::I64 && li->shape.size() == 1 && li->shape[0] >= 1,
                "{}: tensor 'layers' must be I64 [MoE layers]", file);
  const Tensor layers = f->get("layers");
  m.shape.layers.assign(layers.data<int64_t>(), layers.data<int64_t>() + layers.numel());
  const int64_t L = m.shape.moe_layers(), H = m.shape.heads, E = m.shape.experts;
  const TensorInfo* ki = f->find("keep");
  AVDIT_REQUIRE(ki != nullptr, "{}: expert mask without the tensor 'keep'", file);
  AVDIT_REQUIRE(ki->dtype == DType::U8 && ki->shape == Shape({L, H, E}),
                "{}: tensor keep is {} {}, expected U8 [{}, {}, {}] (MoE layers, heads, experts "
                "from its metadata)",
                file, dtype_name(ki->dtype), shape_str(ki->shape), L, H, E);
  m.keep = f->get("keep").clone();
  const uint8_t* k = m.keep.data<uint8_t>();
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      int64_t n = 0;
      for (int64_t e = 0; e < E; ++e) {
        AVDIT_REQUIRE(k[(l * H + h) * E + e] <= 1, "{}: keep[{}, {}, {}] = {} (0 or 1)", file, l, h,
                      e, k[(l * H + h) * E + e]);
        n += k[(l * H + h) * E + e];
      }
      AVDIT_REQUIRE(n >= m.shape.top_k,
                    "{}: layer {} head {} keeps {} experts, fewer than top_k {} (the router would "
                    "have to pick masked ones)",
                    file, m.shape.layers[l], h, n, m.shape.top_k);
    }
  return m;
}

std::map<int64_t, Tensor> mask_router_bias(const ExpertMask& m, const models::magi2::Magi2Config& c,
                                           const std::string& file) {
  RouteShape model;
  for (int64_t i = 0; i < c.num_layers; ++i)
    if (c.is_moe_layer(i)) model.layers.push_back(i);
  model.heads = c.moe.num_heads;
  model.experts = c.moe.num_experts;
  model.top_k = c.moe.top_k;
  AVDIT_REQUIRE(m.shape == model,
                "{}: a mask for {}, but the model has {}; make the mask from statistics of this "
                "model",
                file, m.shape.str(), model.str());
  std::map<int64_t, Tensor> out;
  const int64_t H = m.shape.heads, E = m.shape.experts;
  const uint8_t* k = m.keep.data<uint8_t>();
  for (int64_t l = 0; l < m.shape.moe_layers(); ++l) {
    Tensor b = Tensor::zeros({H * E}, DType::F32);
    for (int64_t i = 0; i < H * E; ++i)
      if (!k[l * H * E + i]) b.f32()[i] = kMaskBias;
    out.emplace(m.shape.layers[l], b);
  }
  return out;
}

}  // namespace avdit::analysis::routes
