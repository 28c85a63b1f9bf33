// init_checkpoint: random H3 weights in the official layout (names, shapes, dtypes, grouped qkv)
// with the golden README's scales, so tests, demos and full-size benchmarks need no download.
#include <cmath>
#include <fstream>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/h3/tensor_specs.h"

namespace avdit::models::h3 {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// rope.inv_freq as the reference builds it: 1 / 10000^(arange(0, 2L, 2) / 2L) in float32.
Tensor rope_inv_freq(int64_t len) {
  std::vector<float> v(len);
  const float axis_dim = static_cast<float>(2 * len);
  for (int64_t j = 0; j < len; ++j)
    v[j] = 1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / axis_dim);
  return Tensor::from_floats(v, {len});
}

// (mean, std) of one tensor by the README's rule.
std::pair<float, float> init_scale(const TensorDecl& d, const H3Config& c) {
  const std::string& n = d.name;
  const bool is_bias = ends_with(n, ".bias");
  const float fan_in = d.shape.size() == 2 ? static_cast<float>(d.shape[1]) : 1.0f;
  if (n == "adaln_t_table") return {0.0f, 1.0f};
  if (!is_bias && contains(n, "norm")) return {1.0f, 0.1f};  // RMSNorm weights
  if (contains(n, "time_embedder.")) {
    if (is_bias) return {0.0f, 0.1f};
    return {0.0f, (contains(n, "proj_in") ? 4.0f : 0.5f) / std::sqrt(fan_in)};
  }
  if (contains(n, "adaln_proj.")) {
    if (is_bias) return {0.0f, 0.1f};
    return {0.0f, 0.5f / std::sqrt(static_cast<float>(c.time_embed_dim))};
  }
  if (is_bias) return {0.0f, 0.02f};
  return {0.0f, 1.0f / std::sqrt(fan_in)};
}

}  // namespace

void init_checkpoint(const nlohmann::json& config_json, const std::filesystem::path& out_dir,
                     uint64_t seed) {
  const H3Config config = H3Config::from_json(config_json);
  std::vector<TensorDecl> decls;
  for (const TensorSpec& s : h3_tensor_specs(config)) decls.push_back({s.name, s.shape, s.dtype});
  std::filesystem::create_directories(out_dir);
  write_checkpoint_sharded(out_dir, decls, [&](const TensorDecl& d) {
    if (d.name == "rope.inv_freq") return rope_inv_freq(d.shape[0]).to(d.dtype);
    Tensor t = Tensor::empty(d.shape, DType::F32);
    const auto [mean, std] = init_scale(d, config);
    fill_normal(t, seed, stream_id(d.name.c_str()), mean, std);
    return d.dtype == DType::F32 ? t : t.to(d.dtype);
  });
  std::ofstream f(out_dir / "config.json");
  AVDIT_REQUIRE(f.good(), "h3 init: cannot write {}", (out_dir / "config.json").string());
  f << config_json.dump(2) << "\n";
  AVDIT_REQUIRE(f.good(), "h3 init: failed writing {}", (out_dir / "config.json").string());
}

}  // namespace avdit::models::h3
