#include "pipeline/pipeline_dir.h"

#include "core/error.h"

namespace avdit::pipeline {

namespace fs = std::filesystem;

const char* pipeline_family_name(PipelineFamily f) {
  return f == PipelineFamily::H3 ? "h3" : "magi2";
}

std::optional<PipelineFamily> pipeline_family(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "model_index.json", ec)) return PipelineFamily::H3;
  if (fs::is_regular_file(dir / "preview" / "config.json", ec)) return PipelineFamily::Magi2;
  return std::nullopt;
}

namespace {

// The override when given, else root/name; either must be a folder holding `needs` (a file every
// folder of that component has), else BadInput saying which option replaces it.
fs::path component(const fs::path& root, const fs::path& given, const char* name,
                   const char* option, const char* needs, const char* what) {
  const bool overridden = !given.empty();
  const fs::path dir = overridden ? given : root / name;
  std::error_code ec;
  const std::string where = overridden ? fmt::format("{} {}", option, dir.string()) : dir.string();
  AVDIT_REQUIRE(fs::is_directory(dir, ec), "{}: no such folder (the {}; pass {} DIR to use another)",
                where, what, option);
  if (needs) {
    AVDIT_REQUIRE(fs::is_regular_file(dir / needs, ec),
                  "{}: no {} in this folder (the {}; pass {} DIR to use another)", where, needs,
                  what, option);
  }
  return dir;
}

}  // namespace

PipelineComponents find_components(const fs::path& dir, const ComponentOverrides& o) {
  std::error_code ec;
  AVDIT_REQUIRE(fs::is_directory(dir, ec), "--model {}: no such folder (a pipeline folder)",
                dir.string());
  const std::optional<PipelineFamily> family = pipeline_family(dir);
  AVDIT_REQUIRE(family,
                "--model {}: not a pipeline folder: expected model_index.json (MiniMax-H3) or "
                "preview/config.json (MAGI-2); `avdit init --pipeline h3|magi2 --size tiny --out "
                "DIR` writes one",
                dir.string());
  PipelineComponents c;
  c.family = *family;
  c.root = dir;
  if (c.family == PipelineFamily::H3) {
    c.dit = component(dir, o.dit, "transformer", "--dit", "config.json", "MiniMax-H3 DiT");
    c.text_encoder = component(dir, o.text_encoder, "text_encoder", "--text-encoder",
                               "config.json", "Qwen3-VL text encoder");
    // The release ships the tokenizer files in tokenizer/ and again beside the encoder.
    const bool own_tokenizer = o.tokenizer.empty() && fs::is_directory(dir / "tokenizer", ec);
    c.tokenizer = !o.tokenizer.empty() || own_tokenizer
                      ? component(dir, o.tokenizer, "tokenizer", "--tokenizer", nullptr, "tokenizer")
                      : c.text_encoder;
    c.video_vae = component(dir, o.video_vae, "video_vae", "--video-vae", "config.json",
                            "MiniMax-H3 video VAE");
    c.audio_vae = component(dir, o.audio_vae, "audio_vae", "--audio-vae", "config.json",
                            "MiniMax-H3 audio VAE");
  } else {
    c.dit = component(dir, o.dit, "preview", "--dit", "config.json", "MAGI-2 preview DiT");
    c.text_encoder = component(dir, o.text_encoder, "text_encoder", "--text-encoder",
                               "config.json", "Qwen3.5 text encoder");
    c.tokenizer = o.tokenizer.empty()
                      ? c.text_encoder
                      : component(dir, o.tokenizer, "tokenizer", "--tokenizer", nullptr, "tokenizer");
    // MAGI-2 decodes with TurboVAED by default (use_turbo_vae); vae/ holds the Wan2.2 VAE.
    const char* video = o.video_vae.empty() && !fs::is_directory(dir / "turbo_vae", ec) &&
                                fs::is_directory(dir / "vae", ec)
                            ? "vae"
                            : "turbo_vae";
    c.video_vae = component(dir, o.video_vae, video, "--video-vae", nullptr,
                            "MAGI-2 video decoder (TurboVAED or the Wan2.2 VAE)");
    c.audio_vae = component(dir, o.audio_vae, "stable-audio-open-1.0", "--audio-vae", nullptr,
                            "Stable Audio Open VAE");
    // The refiner is optional (the 540p preview alone is a whole run); a folder named refiner/
    // must still be one, so a half download is not silently skipped.
    if (!o.refiner.empty() || fs::exists(dir / "refiner", ec))
      c.refiner = component(dir, o.refiner, "refiner", "--refiner", "config.json",
                            "MAGI-2 1080p refiner (config.json: the release's "
                            "configs/magi2_refiner.json with the magi2_preview.json it extends)");
  }
  AVDIT_REQUIRE(o.refiner.empty() || c.family == PipelineFamily::Magi2,
                "--refiner {}: only MAGI-2 pipelines have a refiner; {} is a MiniMax-H3 pipeline",
                o.refiner.string(), dir.string());
  return c;
}

}  // namespace avdit::pipeline
