// Family detection and config-only descriptions (see family.h).
#include "models/family.h"

#include "models/h3/config.h"
#include "models/h3/tensor_specs.h"
#include "models/magi2/config.h"
#include "models/magi2/tensor_specs.h"

namespace avdit::models {

std::optional<std::string> detect_family(const nlohmann::json& config) {
  // The official MAGI-2 configs: the preview's arch_config carries moe_config; the refiner's
  // file names its architecture magi2_refiner_arch_config (and extends the preview's file).
  if (config.contains("magi2_refiner_arch_config")) return "magi2-refiner";
  if (config.contains("arch_config") && config["arch_config"].is_object()) {
    const auto& a = config["arch_config"];
    if (a.contains("moe_config") && !a["moe_config"].is_null()) return "magi2-preview";
    return "magi2-refiner";
  }
  const auto name = config.find("_class_name");  // value() would throw on a non-string name
  if ((name != config.end() && name->is_string() && *name == "MiniMaxH3DiTModel") ||
      (config.contains("adaln_out_features") && config.contains("audio_latents_dim")))
    return "h3";
  return std::nullopt;
}

std::optional<std::string> detect_family_from_names(const std::vector<std::string>& names) {
  bool video_patch = false, audio_patch = false, magi_pre = false, moe = false;
  for (const auto& n : names) {
    video_patch |= n.starts_with("video_patch_proj.");
    audio_patch |= n.starts_with("audio_patch_proj.");
    magi_pre |= n.starts_with("pre_adapter.");
    moe |= n.find(".moe_mlp.") != std::string::npos;
  }
  if (video_patch && audio_patch) return "h3";
  if (magi_pre) return moe ? "magi2-preview" : "magi2-refiner";
  return std::nullopt;
}

std::optional<FamilyReport> describe_family(const std::string& family, const nlohmann::json& config) {
  if (family == "magi2-preview") {
    const auto cfg = magi2::parse_magi2_config(config);
    return FamilyReport{magi2::magi2_tensor_specs(cfg), magi2::magi2_config_report(cfg)};
  }
  if (family == "h3") {
    const auto cfg = h3::H3Config::from_json(config);
    return FamilyReport{h3::h3_tensor_specs(cfg), h3::h3_config_report(cfg)};
  }
  return std::nullopt;  // the MAGI-2 refiner has no model code yet
}

}  // namespace avdit::models
