// init_checkpoint: random MAGI-2 preview weights with scales that keep activations realistic
// (unit-ish residual streams, near-identity mHC mixing, sigmoid gates and router scores off
// saturation), per tensor name:
//   linear weights N(0, gain / sqrt(fan_in)); RMSNorm weights N(0, 0.1) (applied as 1 + w); mHC
//   alphas U(0.3, 0.8), pre/post biases N(0, 0.5), res bias 3*I + N(0, 0.5), phi N(0, 1); sinks
//   U(4.5, 7.5); router biases N(0, 0.15); rope bands exactly the reference's 10000^(-b/B). The
//   gains follow the golden fixture's generator.
#include <cmath>
#include <fstream>
#include <string_view>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/magi2/api.h"
#include "models/magi2/init.h"
#include "models/magi2/tensor_specs.h"

namespace avdit::models::magi2 {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

}  // namespace

double init_linear_gain(std::string_view name) {
  struct Rule {
    std::string_view suffix;
    double gain;
  };
  static constexpr Rule kRules[] = {
      {"_embedder.weight", 1.0},
      {"final_linear_video.weight", 1.0},
      {"final_linear_audio.weight", 1.0},
      {"linear_g.weight", 1.5},
      {"linear_qkv.weight", 1.0},
      {"linear_proj.weight", 2.0},
      {"up_gate_proj.weight", 2.5},
      {"down_proj.weight", 0.3},
      {"moe_mlp.gate", 1.5},
      {"moe_mlp.W_gate", 2.5},
      {"moe_mlp.W_up", 2.5},
      {"moe_mlp.W_down", 0.1},
      {"shared_expert_fc1.weight", 2.5},
      {"shared_expert_fc2.weight", 0.3},
      {"split_linear.weight", 1.0},
      {"merge_linear.weight", 0.5},
  };
  for (const Rule& r : kRules)
    if (ends_with(name, r.suffix)) return r.gain;
  return 0.0;
}

Tensor init_tensor(const TensorSpec& d, uint64_t seed) {
  const std::string& name = d.name;
  const uint64_t stream = stream_id(name.c_str());
  Tensor t = Tensor::empty(d.shape, DType::F32);
  float* v = t.f32();
  const int64_t n = t.numel();
  auto normal = [&](float stdev, float mean = 0.f) { fill_normal(t, seed, stream, mean, stdev); };
  auto uniform = [&](float lo, float hi) {
    for (int64_t i = 0; i < n; ++i)
      v[i] = lo + (hi - lo) * rng_uniform(seed, stream, static_cast<uint64_t>(i));
  };
  if (ends_with(name, "rope.bands")) {
    // freq_bands(B, 10000, step 1): 1 / 10000^(b / B), in float32 as the reference computes it.
    for (int64_t b = 0; b < n; ++b)
      v[b] = 1.0f / std::pow(10000.0f, static_cast<float>(b) / static_cast<float>(n));
  } else if (const double gain = init_linear_gain(name); gain > 0) {
    // [out, in] for nn.Linear-style weights; [HE, in, out] for the experts (fan_in = dim 1).
    const int64_t fan_in = d.shape.size() == 3 ? d.shape[1] : d.shape.back();
    normal(static_cast<float>(gain / std::sqrt(static_cast<double>(fan_in))));
  } else if (ends_with(name, "_embedder.bias")) {
    normal(0.1f);
  } else if (contains(name, "mhc_alpha_")) {
    uniform(0.3f, 0.8f);
  } else if (contains(name, "mhc_bias_res_")) {
    normal(0.5f);
    const int64_t k = d.shape[0];
    for (int64_t i = 0; i < k; ++i)
      v[i * k + i] += 3.0f;  // near-identity stream mixing after Sinkhorn
  } else if (contains(name, "mhc_bias_")) {
    normal(0.5f);
  } else if (contains(name, "mhc_phi_fused_")) {
    normal(1.0f);
  } else if (ends_with(name, "attention.sinks")) {
    uniform(4.5f, 7.5f);
  } else if (contains(name, "router.expert_bias")) {
    normal(0.15f);
  } else if (contains(name, "norm") && ends_with(name, ".weight")) {
    normal(0.1f);
  } else {
    throw RuntimeFailure(fmt::format("magi2 init: no init rule for tensor {}", name));
  }
  return d.dtype == DType::F32 ? t : t.to(d.dtype);
}

void init_checkpoint(const nlohmann::json& config, const std::filesystem::path& out_dir,
                     uint64_t seed) {
  AVDIT_REQUIRE(is_magi2_config(config),
                "magi2 init: the config is not a MAGI-2 preview config (no arch_config)");
  const Magi2Config c = parse_magi2_config(config);
  std::vector<TensorDecl> decls;
  for (const TensorSpec& s : magi2_tensor_specs(c))
    decls.push_back(TensorDecl{s.name, s.shape, s.dtype});
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  AVDIT_REQUIRE(!ec, "magi2 init: cannot create {}: {}", out_dir.string(), ec.message());
  write_checkpoint_sharded(out_dir, decls,
                           [seed](const TensorDecl& d) { return init_tensor(d, seed); });
  const std::filesystem::path cfg_path = out_dir / "config.json";
  std::ofstream f(cfg_path);
  AVDIT_REQUIRE(f.good(), "magi2 init: cannot write {}", cfg_path.string());
  f << config.dump(2) << "\n";
  AVDIT_REQUIRE(f.good(), "magi2 init: failed writing {}", cfg_path.string());
}

}  // namespace avdit::models::magi2
