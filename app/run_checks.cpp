// Pre-run checks of the generate and forward commands (see run_checks.h). The memory figure is a
// lower bound: only buffers every run of that size holds at once are counted, so a refusal is
// always right, and a run that passes may still need more.
#include "run_checks.h"

#include <charconv>

#include "core/checked.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "models/h3/config.h"
#include "models/magi2/config.h"

namespace avdit::app {

namespace fs = std::filesystem;

std::vector<fs::path> checkpoint_files(const Checkpoint& ckpt) {
  std::vector<fs::path> files = {ckpt.source(), ckpt.dir() / "config.json"};
  for (const auto& f : ckpt.files()) files.push_back(f->path());
  return files;
}

int64_t parse_int64(std::string_view text, std::string_view what) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  AVDIT_REQUIRE(ec == std::errc() && end == text.data() + text.size(),
                "{}: '{}' is not an integer in [-2^63, 2^63 - 1]", what, text);
  return v;
}

CLI::Validator uint64_string() {
  return CLI::Validator(
      [](const std::string& s) -> std::string {
        uint64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc() && end == s.data() + s.size()) return "";
        return fmt::format("'{}' is not an integer in [0, 2^64 - 1]", s);
      },
      "UINT64");
}

void check_generate_memory(const std::string& family, const nlohmann::json& config,
                           const GenerateSize& s) {
  for (const auto& [shape, what] : {std::pair{&s.video, "video"}, std::pair{&s.audio, "audio"}})
    AVDIT_REQUIRE(checked::numel(*shape).has_value(),
                  "the {} latent shape {} has more than 2^56 elements (check --latent-shape, "
                  "--frames/--height/--width or --noise)",
                  what, shape_str(*shape));
  // Doubles: the figures are estimates, and sums of shapes near the limit must not wrap.
  const double latent = static_cast<double>(shape_numel(s.video) + shape_numel(s.audio));
  // Initial noise, the current latents, the guided velocity and the two model outputs of a step.
  const double latents = 5 * latent;
  double trajectory = 0;
  if (s.trajectory) {
    // latents [steps + 1] and velocity [steps], then their stacked copies when written.
    trajectory = 2 * (2.0 * s.steps + 1) * latent;
    if (s.model_out) trajectory += 2 * 2.0 * s.steps * latent;
  }
  double tokens = static_cast<double>(s.text_tokens), per_token = 0;
  if (family == "h3") {
    const auto c = models::h3::H3Config::from_json(config);
    if (s.video.size() == 5)
      tokens += static_cast<double>(s.video[2] * (s.video[3] / 2) * (s.video[4] / 2));
    if (s.audio.size() == 3) tokens += static_cast<double>(s.audio[2]);
    // The residual stream and its normalised copy, q/k/v, the MLP's gate and up.
    per_token = 2.0 * c.hidden_size + 3.0 * c.inner_dim() + 2.0 * c.ffn_hidden_size;
  } else {
    const auto c = models::magi2::parse_magi2_config(config);
    const double patch = static_cast<double>(c.data_proxy.t_patch_size * c.data_proxy.patch_size *
                                             c.data_proxy.patch_size);
    if (s.video.size() == 5)
      tokens += static_cast<double>(s.video[2]) * static_cast<double>(s.video[3]) *
                static_cast<double>(s.video[4]) / patch;
    if (s.audio.size() == 3) tokens += static_cast<double>(s.audio[1]);
    // The mHC residual streams, the hidden state and its norm, q/k/v, the dense MLP's gate and up.
    per_token = static_cast<double>(c.residual_width) + 2.0 * c.hidden_size +
                static_cast<double>((c.num_heads_q + 2 * c.num_heads_kv) * c.head_dim) +
                2.0 * c.dense_intermediate;
  }
  const double activations = s.cpu_forward ? tokens * per_token : 0;
  const double bytes = 4 * (latents + trajectory + activations);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const std::string breakdown = fmt::format(
      "latents {:.2f} GiB, trajectory {:.2f} GiB, activations of {:.0f} tokens {:.2f} GiB",
      4 * latents / kGiB, 4 * trajectory / kGiB, tokens, 4 * activations / kGiB);
  const double capped = std::min(bytes, static_cast<double>(checked::kMaxBytes));
  require_host_memory(static_cast<int64_t>(capped), host_memory_available(), "this run", breakdown);
}

void check_forward_memory(const std::string& family, const nlohmann::json& config,
                          const TensorMap& inputs, bool cpu_forward) {
  GenerateSize s;
  auto shape_of = [&](const char* name) {
    const auto it = inputs.find(name);
    return it == inputs.end() ? Shape{} : it->second.shape();
  };
  s.video = shape_of("video_latent");
  s.audio = shape_of("audio_latent");
  for (const char* name : {"text_embeds", "txt_feat"}) {
    const Shape t = shape_of(name);
    if (!t.empty() && t.back() > 0) s.text_tokens = shape_numel(t) / t.back();
  }
  s.cpu_forward = cpu_forward;
  check_generate_memory(family, config, s);
}

}  // namespace avdit::app
