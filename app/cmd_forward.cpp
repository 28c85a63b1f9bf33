// `avdit forward`: one model forward on inputs in the golden fixtures' format. avdit packs the
// sequence itself from the unpacked tensors and writes every output under the fixture's names,
// so any fixture of this format is checked by comparing files by name.
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "models/family.h"
#include "models/h3/api.h"
#include "models/magi2/api.h"

namespace avdit::app {

namespace fs = std::filesystem;

Run add_forward(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "forward",
      "Run one forward pass of a model on fixture-format inputs and write its outputs.\n"
      "MAGI-2 inputs: video_latent, audio_latent, txt_feat (+ txt_feat_len, audio_feat_len,\n"
      "per_token_video_t, per_token_audio_t). H3 inputs: video_latent, audio_latent, text_embeds,\n"
      "t_video/t_audio or sigma_video/sigma_audio (+ cond_latent, keyframe indices, text tags).\n"
      "Example: avdit forward --model ../shared/golden/magi2-tiny \\\n"
      "           --inputs ../shared/golden/magi2-tiny/inputs.safetensors --out out.safetensors");
  struct Opts {
    std::string model, inputs, out;
    bool dump = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--model", o->model, "Model folder (config.json + safetensors)")->required();
  cmd->add_option("--inputs", o->inputs, "Inputs .safetensors (the fixtures' format)")->required();
  cmd->add_option("--out", o->out, "Where to write the outputs (.safetensors)")->required();
  cmd->add_flag("--dump", o->dump, "Also write the packed inputs and every intermediate (layers, router, ...)");
  return [o]() {
    const Checkpoint ckpt = Checkpoint::open(o->model);
    AVDIT_REQUIRE(ckpt.config(), "{}: no config.json beside the weights; avdit forward needs the model's config",
                  o->model);
    const auto family = models::detect_family(*ckpt.config());
    AVDIT_REQUIRE(family, "{}/config.json: not a config of a family avdit knows (magi2-preview, h3)", o->model);
    const TensorMap inputs = read_all(o->inputs);
    TensorMap out;
    if (*family == "magi2-preview") {
      out = models::magi2::forward_from_inputs(ckpt, inputs, o->dump);
    } else if (*family == "h3") {
      out = models::h3::forward_from_inputs(ckpt, inputs, o->dump);
    } else {
      throw BadInput(fmt::format("{}: avdit forward does not run the {} family yet", o->model, *family));
    }
    write_safetensors(o->out, out);
    log::info("wrote {} tensors to {}", out.size(), o->out);
    return 0;
  };
}

}  // namespace avdit::app
