// `avdit quantize --nvfp4 experts IN OUT`: a copy of a MAGI-2 checkpoint whose routed experts are
// NVFP4-packed (4.5 bits per weight), loadable by every avdit command as it is (models/magi2/quantize.h).
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "models/magi2/quantize.h"

namespace avdit::app {

Run add_quantize(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quantize",
      "Write a copy of a checkpoint with some weights quantised. Today: --nvfp4 experts packs the\n"
      "MAGI-2 preview's routed experts (moe_mlp.W_gate / W_up / W_down) to NVFP4 (e2m1 values, an\n"
      "e4m3 scale per 16 weights along the reduction dim, an fp32 scale per expert: 4.5 bits per\n"
      "weight, TransformerEngine's recipe); everything else is copied unchanged. avdit loads the\n"
      "result directly; `--nvfp4-experts` on forward/generate packs at load time instead, with the\n"
      "same result. The tensor names are in the README (NVFP4 experts).\n"
      "Example: avdit quantize --nvfp4 experts ../shared/golden/magi2-tiny /tmp/magi2-tiny-nvfp4");
  struct Opts {
    std::string mode, in, out;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--nvfp4", o->mode, "What to pack to NVFP4: experts (the routed experts)")->required();
  cmd->add_option("IN", o->in, "MAGI-2 checkpoint: model folder (with config.json), .safetensors or index")
      ->required();
  cmd->add_option("OUT", o->out, "New output folder (must not exist)")->required();
  return [o]() {
    AVDIT_REQUIRE(o->mode == "experts", "quantize: unknown --nvfp4 mode '{}' (the only mode is: experts)", o->mode);
    const quant::QuantizeSummary s =
        models::magi2::quantize_nvfp4_experts(o->in, o->out, log::level() <= log::Level::Info);
    log::info("{}: {} routed-expert tensors packed ({:.3f} GB -> {:.3f} GB), {} tensors copied; {} file{}, {:.3f} GB",
              o->out, s.packed_tensors, s.routed_bytes_in / 1e9, s.routed_bytes_out / 1e9, s.copied_tensors, s.shards,
              s.shards == 1 ? "" : "s", s.bytes_out / 1e9);
    return 0;
  };
}

}  // namespace avdit::app
