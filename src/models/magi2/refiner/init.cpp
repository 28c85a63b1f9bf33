// init_refiner_checkpoint (see init.h). The refiner's tensors carry the preview's role suffixes
// (linear_qkv, linear_proj, linear_g, up_gate_proj, down_proj, *_embedder, final_linear_*, norms,
// rope.bands), so the preview's rule gives them realistic scales.
#include "models/magi2/refiner/init.h"

#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/magi2/init.h"
#include "models/magi2/refiner/config.h"
#include "models/magi2/refiner/weights.h"

namespace avdit::models::magi2::refiner {

void init_refiner_checkpoint(const nlohmann::json& config, const std::filesystem::path& out_dir,
                             uint64_t seed) {
  AVDIT_REQUIRE(!config.contains("extends"),
                "magi2 refiner init: resolve \"extends\" before writing the config");
  const RefinerConfig c = parse_refiner_config(config);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  AVDIT_REQUIRE(!ec, "magi2 refiner init: cannot create {}: {}", out_dir.string(), ec.message());
  // A seed of its own, so the refiner's draws never repeat the preview's for like-named tensors.
  const uint64_t refiner_seed = seed ^ 0x726566696e6572ULL;  // "refiner"
  write_checkpoint_sharded(out_dir, refiner_tensor_specs(c), [refiner_seed](const TensorDecl& d) {
    return models::magi2::init_tensor(d, refiner_seed);
  });
  const std::filesystem::path cfg_path = out_dir / "config.json";
  std::ofstream f(cfg_path);
  f << config.dump(2) << "\n";
  AVDIT_REQUIRE(f.good(), "magi2 refiner init: failed writing {}", cfg_path.string());
}

}  // namespace avdit::models::magi2::refiner
