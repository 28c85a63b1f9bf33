// init_checkpoint: random H3 weights in the official layout (names, shapes, dtypes, grouped qkv)
// with the golden README's scales, so tests, demos and full-size benchmarks need no download.
#include <cmath>
#include <fstream>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/h3/tensor_specs.h"
#include "models/h3/weights.h"

namespace avdit::models::h3 {

void init_checkpoint(const nlohmann::json& config_json, const std::filesystem::path& out_dir,
                     uint64_t seed) {
  const H3Config config = H3Config::from_json(config_json);
  std::vector<TensorDecl> decls;
  for (const TensorSpec& s : h3_tensor_specs(config)) decls.push_back({s.name, s.shape, s.dtype});
  std::filesystem::create_directories(out_dir);
  write_checkpoint_sharded(out_dir, decls, [&](const TensorDecl& d) {
    if (d.name == "rope.inv_freq") return rope_inv_freq(d.shape[0]).to(d.dtype);
    Tensor t = Tensor::empty(d.shape, DType::F32);
    const auto [mean, std] = init_scale(d.name, d.shape, config);
    fill_normal(t, seed, stream_id(d.name.c_str()), mean, std);
    return d.dtype == DType::F32 ? t : t.to(d.dtype);
  });
  std::ofstream f(out_dir / "config.json");
  AVDIT_REQUIRE(f.good(), "h3 init: cannot write {}", (out_dir / "config.json").string());
  f << config_json.dump(2) << "\n";
  AVDIT_REQUIRE(f.good(), "h3 init: failed writing {}", (out_dir / "config.json").string());
}

}  // namespace avdit::models::h3
