// open_text_encoder: the one place that maps a text encoder folder to its family.
#include "models/text/text_encoder.h"

#include <fmt/format.h>

#include <string>
#include <utility>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/text/qwen35/encoder.h"
#include "models/text/qwen3vl/encoder.h"

namespace avdit::models::text {

namespace {

// config.json of a text encoder folder and its family (model_type), read once per open.
std::pair<nlohmann::json, std::string> read_family(const std::filesystem::path& dir) {
  const std::filesystem::path config = dir / "config.json";
  std::error_code ec;
  AVDIT_REQUIRE(std::filesystem::is_regular_file(config, ec),
                "{}: no config.json (--model must be a text encoder folder: config.json + "
                "safetensors)",
                dir.string());
  nlohmann::json j = read_json(config);
  std::string type = j.is_object() && j.contains("model_type") && j["model_type"].is_string()
                         ? j["model_type"].get<std::string>()
                         : std::string();
  AVDIT_REQUIRE(type == "qwen3_vl" || type == "qwen3_5",
                "{}: model_type '{}' is not a text encoder avdit knows (qwen3_vl for MiniMax-H3, "
                "qwen3_5 for MAGI-2)",
                config.string(), type);
  return {std::move(j), std::move(type)};
}

}  // namespace

std::string text_encoder_family(const std::filesystem::path& dir) {
  return read_family(dir).second;
}

std::unique_ptr<TextEncoder> open_text_encoder(ops::Context& ctx, const std::filesystem::path& dir,
                                               const TextEncoderOptions& options) {
  const auto [j, type] = read_family(dir);
  if (type == "qwen3_vl") {
    const int layers =
        options.selected_layers > 0 ? options.selected_layers : qwen3vl::kH3SelectedLayers;
    if (options.random_seed)
      return std::make_unique<qwen3vl::Qwen3VLTextEncoder>(
          ctx, qwen3vl::Qwen3VLTextConfig::from_json(j), layers, options.act, *options.random_seed);
    return open_qwen3vl_text(ctx, dir, layers, options.act);
  }
  // MAGI-2 consumes hidden_states[-3]: every layer but the last two. A layer count, when given,
  // is turned into the layers skipped at the end.
  int skip = 2;
  if (options.selected_layers > 0) {
    const nlohmann::json& t = j.contains("text_config") ? j["text_config"] : j;
    const int64_t layers = t.value("num_hidden_layers", int64_t{0});
    AVDIT_REQUIRE(options.selected_layers < layers,
                  "{}: {} layers requested, the model has {} (MAGI-2 runs all but at least the "
                  "last one)",
                  dir.string(), options.selected_layers, layers);
    skip = static_cast<int>(layers - options.selected_layers);
  }
  if (options.random_seed) {
    qwen35::Qwen35TextConfig config = qwen35::parse_qwen35_text_config(j);
    AVDIT_REQUIRE(skip >= 1 && skip < config.num_hidden_layers,
                  "Qwen3.5 text encoder {}: skip_layers {} must be in [1, {}) (MAGI-2 uses 2)",
                  dir.string(), skip, config.num_hidden_layers);
    qwen35::Qwen35TextWeights w = qwen35::random_text_weights(
        ctx, config, config.num_hidden_layers - skip, *options.random_seed);
    return std::make_unique<qwen35::Qwen35TextEncoder>(
        ctx, std::move(config), std::move(w),
        fmt::format("random weights (seed {}) of {}", *options.random_seed, dir.string()),
        options.act);
  }
  return open_qwen35_text(ctx, dir, skip, options.act);
}

}  // namespace avdit::models::text
