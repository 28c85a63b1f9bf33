// open_text_encoder: the one place that maps a text encoder folder to its family.
#include "models/text/text_encoder.h"

#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/text/qwen3vl/encoder.h"

namespace avdit::models::text {

std::unique_ptr<TextEncoder> open_text_encoder(ops::Context& ctx, const std::filesystem::path& dir,
                                               const TextEncoderOptions& options) {
  const std::filesystem::path config = dir / "config.json";
  std::error_code ec;
  AVDIT_REQUIRE(std::filesystem::is_regular_file(config, ec),
                "{}: no config.json (--model must be a text encoder folder: config.json + "
                "safetensors)",
                dir.string());
  const nlohmann::json j = read_json(config);
  const std::string type = j.is_object() && j.contains("model_type") && j["model_type"].is_string()
                               ? j["model_type"].get<std::string>()
                               : std::string();
  if (type == "qwen3_vl")
    return open_qwen3vl_text(
        ctx, dir,
        options.selected_layers > 0 ? options.selected_layers : qwen3vl::kH3SelectedLayers,
        options.act);
  // MAGI-2's Qwen3.5 hybrid plugs in here (its own folder beside qwen3vl/).
  AVDIT_REQUIRE(type != "qwen3_5",
                "{}: the Qwen3.5 text encoder (MAGI-2) is not built yet; only qwen3_vl "
                "(MiniMax-H3) encodes for now",
                config.string());
  throw BadInput(fmt::format(
      "{}: model_type '{}' is not a text encoder avdit knows (qwen3_vl for MiniMax-H3, qwen3_5 "
      "for MAGI-2)",
      config.string(), type));
}

}  // namespace avdit::models::text
