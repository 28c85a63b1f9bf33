// open_decoder: recognises the five families by a field only their config carries (the goldens
// keep the release's config under a wrapper key, so both spellings are looked for), or, for the
// MAGI-2 release's VAE folders that have none, by their files' names.
#include "models/vae/decoder_factory.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/bigvgan/decoder.h"
#include "models/vae/h3video/decoder.h"
#include "models/vae/oobleck/config.h"
#include "models/vae/oobleck/decoder.h"
#include "models/vae/turbo/decoder.h"
#include "models/vae/wan22/decoder.h"

namespace avdit::models::vae {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// `_class_name` of the config or of any object one level down (a golden's wrapper keys).
bool has_class(const json& c, const std::string& name) {
  auto is = [&](const json& o) {
    return o.is_object() && o.contains("_class_name") && o["_class_name"] == name;
  };
  if (is(c)) return true;
  if (c.is_object())
    for (const auto& [k, v] : c.items())
      if (is(v)) return true;
  return false;
}

bool class_starts(const json& c, const std::string& prefix) {
  return c.is_object() && c.contains("class") && c["class"].is_string() &&
         c["class"].get<std::string>().starts_with(prefix);
}

}  // namespace

Tensor Decoder::decode_frames(const Tensor&) const {
  throw BadInput(fmt::format("{}: gives its output on the host only (decode); frames on the "
                             "device are the Wan2.2 and TurboVAED decoders'",
                             describe()));
}

Tensor Decoder::decode_on_device(const Tensor&) const {
  throw BadInput(fmt::format("{}: gives its output on the host only (decode)", describe()));
}

const char* family_name(Family f) {
  switch (f) {
    case Family::Wan22: return "Wan2.2 VAE";
    case Family::TurboVaed: return "MAGI-2 TurboVAED";
    case Family::Oobleck: return "Stable Audio Open (Oobleck) VAE";
    case Family::H3Video: return "MiniMax-H3 video VAE";
    case Family::H3Audio: return "MiniMax-H3 audio VAE";
  }
  return "?";
}

Family detect_family(const fs::path& dir) {
  std::error_code ec;
  AVDIT_REQUIRE(fs::is_directory(dir, ec), "--model {}: no such folder (a VAE folder)",
                dir.string());
  if (oobleck::is_oobleck_folder(dir)) return Family::Oobleck;
  // The MAGI-2 release's folders ship no config.json: vae/ holds Wan2.2_VAE.pth alone, turbo_vae/
  // the architecture JSON beside checkpoint.ckpt.
  if (!fs::exists(dir / "config.json", ec)) {
    if (fs::is_regular_file(dir / "Wan2.2_VAE.pth", ec)) return Family::Wan22;
    if (fs::is_regular_file(dir / "TurboV3-Wan22-TinyShallow_7_7.json", ec))
      return Family::TurboVaed;
  }
  AVDIT_REQUIRE(fs::is_regular_file(dir / "config.json", ec),
                "{}: no config.json or model_config.json (--model must be a VAE folder)",
                dir.string());
  const json c = read_json(dir / "config.json");
  if (has_class(c, "MiniMaxH3AudioVAE")) return Family::H3Audio;
  if (has_class(c, "MiniMaxH3VideoVAE")) return Family::H3Video;
  if (has_class(c, "TurboVAED") || class_starts(c, "TurboVAED")) return Family::TurboVaed;
  // The Wan2.2 VAE ships no config.json of its own; the goldens name its class.
  if (class_starts(c, "WanVAE_") || (c.is_object() && c.contains("WanVAE_kwargs")))
    return Family::Wan22;
  throw BadInput(fmt::format(
      "{}: not a VAE folder avdit knows (Wan2.2 VAE, TurboVAED, Stable Audio Open, MiniMax-H3 "
      "video or audio VAE)",
      dir.string()));
}

bool has_bf16(Family f) {
  return f == Family::Wan22 || f == Family::TurboVaed || f == Family::H3Video;
}

std::unique_ptr<Decoder> open_decoder(ops::Context& ctx, const fs::path& dir, DType act) {
  const Family f = detect_family(dir);
  AVDIT_REQUIRE(act == DType::F32 || has_bf16(f),
                "{}: the {} decoder runs in F32 only ({} was asked for)", dir.string(),
                family_name(f), dtype_name(act));
  switch (f) {
    case Family::Oobleck: return open_oobleck(ctx, dir);
    case Family::H3Audio: return open_h3_audio(ctx, dir);
    case Family::Wan22: return open_wan22_decoder(ctx, dir, act);
    case Family::TurboVaed: return open_turbo_vaed(ctx, dir, act);
    case Family::H3Video: return open_h3_video_decoder(ctx, dir, act);
  }
  throw BadInput(fmt::format("{}: unknown VAE family", dir.string()));
}

}  // namespace avdit::models::vae
