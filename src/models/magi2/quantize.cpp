// The MAGI-2 check in front of the NVFP4 expert packing (see quantize.h).
#include "models/magi2/quantize.h"

#include "core/error.h"
#include "io/safetensors.h"
#include "models/magi2/config.h"

namespace avdit::models::magi2 {

quant::QuantizeSummary quantize_nvfp4_experts(const std::filesystem::path& in,
                                              const std::filesystem::path& out, bool progress) {
  AVDIT_REQUIRE(!std::filesystem::exists(out),
                "{}: already exists; quantize writes a new folder (remove it or choose another)",
                out.string());
  AVDIT_REQUIRE(std::filesystem::exists(in), "{}: no such file or folder", in.string());
  const Checkpoint ckpt = Checkpoint::open(in);
  const nlohmann::json* cfg = ckpt.config();
  AVDIT_REQUIRE(
      cfg != nullptr && is_magi2_config(*cfg),
      "{}: not a MAGI-2 checkpoint ({}); NVFP4 expert packing applies to the MAGI-2 preview's "
      "routed "
      "experts only",
      in.string(),
      cfg ? "its config.json has no arch_config with moe_config" : "no config.json beside it");
  parse_magi2_config(*cfg);  // a config the model cannot load is refused here, not at load time
  return quant::quantize_checkpoint_nvfp4_experts(in, out, progress);
}

}  // namespace avdit::models::magi2
