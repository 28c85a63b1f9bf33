#include "pipeline/pipeline_plan.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <functional>
#include <string_view>

#include "io/safetensors.h"
#include "models/text/qwen3vl/weights.h"
#include "models/text/text_encoder.h"
#include "models/vae/decoder_factory.h"

namespace avdit::pipeline {

namespace fs = std::filesystem;

namespace {

// The decoder layer index in a name ("...layers.12.mlp..." -> 12), -1 when there is none.
int64_t layer_of(std::string_view name) {
  const size_t at = name.find("layers.");
  if (at == std::string_view::npos) return -1;
  const char* p = name.data() + at + 7;
  int64_t i = -1;
  const auto [end, ec] = std::from_chars(p, name.data() + name.size(), i);
  return ec == std::errc() && end < name.data() + name.size() && *end == '.' ? i : -1;
}

int64_t text_layers(const fs::path& dir) {
  const nlohmann::json c = read_json(dir / "config.json");
  const nlohmann::json& t = c.contains("text_config") ? c["text_config"] : c;
  return t.value("num_hidden_layers", int64_t{0});
}

ComponentPlan component(const std::string& stage, const std::string& what, const fs::path& dir,
                        const std::string& kind, const std::function<bool(std::string_view)>& read,
                        int dtype_bytes) {
  ComponentPlan p;
  p.stage = stage;
  p.component = what;
  p.path = dir.string();
  p.kind = kind;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) {
      ++p.files;
      p.disk_bytes += static_cast<int64_t>(e.file_size(ec));
    }
  if (!Checkpoint::folder_has_weights(dir)) {
    p.configs_only = true;
    return p;
  }
  const Checkpoint ckpt = Checkpoint::open(dir, read ? Checkpoint::Wanted(read) : Checkpoint::Wanted());
  for (const std::string& n : ckpt.names()) {
    const TensorInfo& i = ckpt.info(n);
    int64_t numel = 1;
    for (int64_t d : i.shape) numel *= d;
    p.params += numel;
    p.read_bytes += numel * static_cast<int64_t>(dtype_nbytes(i.dtype, 1));
  }
  p.resident_bytes = p.params * dtype_bytes;
  return p;
}

}  // namespace

std::vector<ComponentPlan> plan_pipeline(const PipelineComponents& c, int dtype_bytes) {
  std::vector<ComponentPlan> out;
  const std::string te = models::text::text_encoder_family(c.text_encoder);
  const int64_t layers = text_layers(c.text_encoder);
  if (te == "qwen3_vl") {
    const int64_t used = layers > 0 && layers < 50 ? layers : 50;
    out.push_back(component("encode", "text encoder", c.text_encoder, te,
                            [used](std::string_view n) {
                              return models::text::qwen3vl::is_needed(n, used);
                            },
                            dtype_bytes));
  } else {
    // MAGI-2 consumes hidden_states[-3]: the embedding and every layer but the last two; no
    // vision tower, no lm_head. Its activations run in fp32, so are its weights on the GPU.
    out.push_back(component("encode", "text encoder", c.text_encoder, te,
                            [layers](std::string_view n) {
                              if (n.find("visual") != std::string_view::npos ||
                                  n.find("lm_head") != std::string_view::npos ||
                                  n.find("mtp") != std::string_view::npos)
                                return false;
                              if (n.find("embed_tokens") != std::string_view::npos) return true;
                              const int64_t i = layer_of(n);
                              return i >= 0 && i < layers - 2;
                            },
                            4));
  }
  out.push_back(component("sample", "DiT", c.dit,
                          c.family == PipelineFamily::H3 ? "MiniMax-H3" : "MAGI-2 preview", {},
                          dtype_bytes));
  if (!c.refiner.empty())  // the second stage, after the preview is freed
    out.push_back(component("refine", "refiner", c.refiner, "MAGI-2 refiner", {}, dtype_bytes));
  for (const auto& [stage, dir] : {std::pair{"decode video", c.video_vae}, {"decode audio", c.audio_vae}})
    out.push_back(component(stage, stage == std::string("decode video") ? "video decoder" : "audio decoder",
                            dir, models::vae::family_name(models::vae::detect_family(dir)), {},
                            4));  // the decoders keep float32 weights on the GPU
  return out;
}

}  // namespace avdit::pipeline
