// `avdit forward`: one model forward on inputs in the golden fixtures' format. avdit packs the
// sequence itself from the unpacked tensors and writes every output under the fixture's names,
// so any fixture of this format is checked by comparing files by name.
#include <filesystem>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "commands.h"
#include "context.h"
#include "core/error.h"
#include "core/log.h"
#include "io/finite.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "models/family.h"
#include "models/fp16_recipe.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "models/magi2/api.h"
#include "range_report_options.h"
#include "run_checks.h"

namespace avdit::app {

namespace fs = std::filesystem;

namespace {

// `--dump hidden,router` (MAGI-2): keep the outputs plus layers.{i}.output ("hidden") and the
// layers.{i}.router.* tensors ("router"); an empty list keeps everything.
TensorMap select_dump(TensorMap all, const std::string& list) {
  if (list.empty()) return all;
  std::set<std::string> items;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    if (item != "hidden" && item != "router")
      throw BadInput(fmt::format("--dump: unknown item '{}' (known: hidden, router; or no value for all)", item));
    items.insert(item);
  }
  static const std::regex hidden(R"(layers\.\d+\.output)"), router(R"(layers\.\d+\.router\..*)");
  TensorMap kept;
  for (auto& [name, t] : all) {
    const bool output = name == "video_velocity" || name == "audio_velocity" || name == "model_output";
    if (output || (items.count("hidden") && std::regex_match(name, hidden)) ||
        (items.count("router") && std::regex_match(name, router)))
      kept[name] = std::move(t);
  }
  return kept;
}

}  // namespace

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
    std::string dump_list;  // --dump's optional value: empty = everything
    std::string precision = "fp32";
    std::string fp16_fix = "all";
    std::string device = "cpu";
    bool nvfp4_experts = false;
    std::string range_report;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--model", o->model, "Model folder (config.json + safetensors)")->required();
  cmd->add_option("--inputs", o->inputs, "Inputs .safetensors (the fixtures' format)")->required();
  cmd->add_option("--out", o->out, "Where to write the outputs (.safetensors)")->required();
  auto* dump = cmd->add_option("--dump", o->dump_list,
                               "Also write intermediates: alone = the packed inputs and every intermediate; with a "
                               "list (MAGI-2: hidden,router) = only layers.{i}.output and/or the router tensors")
                   ->expected(0, 1);
  cmd->add_option("--precision", o->precision,
                  "fp32 (the oracle) or bf16 (emulated production precision: activations rounded to bf16 where "
                  "the reference holds them in bf16), or fp16 (H3: the fp16 recipe, see --fp16-fix)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--fp16-fix", o->fp16_fix,
                  "With --precision fp16: the recipe's fixes, all (default), none (the naive cast) or a list of "
                  "residual, rowscale, gating, reduction, gate")
      ->capture_default_str();
  cmd->add_option("--device", o->device,
                  "cpu (the float32 oracle, bf16 emulated) or cuda (the GPU backend: fp32 parity or bf16 production "
                  "precision)")
      ->capture_default_str();
  cmd->add_option("--range-report", o->range_report, kRangeReportHelp);
  cmd->add_flag("--nvfp4-experts", o->nvfp4_experts,
                "MAGI-2: pack the routed experts to NVFP4 at load time (as `avdit quantize --nvfp4 experts` "
                "would; a packed checkpoint loads packed without it)");
  return [o, dump]() {
    const std::unique_ptr<ops::Context> ctx = make_context(o->device);
    const DType act = activation_dtype(o->precision);
    AVDIT_REQUIRE(o->fp16_fix == "all" || act == DType::F16, "--fp16-fix {} needs --precision fp16", o->fp16_fix);
    models::parse_fp16_fixes(o->fp16_fix);  // a bad list fails before any work
    const Checkpoint ckpt = Checkpoint::open(o->model);
    AVDIT_REQUIRE(ckpt.config(), "{}: no config.json beside the weights; avdit forward needs the model's config",
                  o->model);
    const auto family = models::detect_family(*ckpt.config());
    AVDIT_REQUIRE(family, "{}/config.json: not a config of a family avdit knows (magi2-preview, h3)", o->model);
    const TensorMap inputs = read_all(o->inputs);
    require_finite(inputs, o->inputs);
    std::vector<fs::path> input_files = checkpoint_files(ckpt);
    input_files.push_back(o->inputs);
    check_output_path(o->out, "--out", input_files);
    RangeReportRun ranges(o->range_report, *family, *ckpt.config(), input_files, {{o->out, "--out"}});
    const auto ranges_attached = ranges.attach(*ctx);
    if (*family == "magi2-preview" || *family == "h3")
      check_forward_memory(*family, *ckpt.config(), inputs, o->device == "cpu");
    select_dump({}, o->dump_list);  // an unknown --dump item fails before the forward
    const bool want_dump = dump->count() > 0;
    AVDIT_REQUIRE(!o->nvfp4_experts || *family == "magi2-preview",
                  "--nvfp4-experts packs MAGI-2's routed experts; {} is a {} model", o->model, *family);
    TensorMap out;
    if (*family == "magi2-preview") {
      models::magi2::LoadOptions load;
      load.nvfp4_experts = o->nvfp4_experts;
      const models::magi2::Magi2Model model(*ctx, ckpt, act, load);
      out = select_dump(models::magi2::forward_from_inputs(model, inputs, want_dump), o->dump_list);
      if (ctx->is_cuda()) log::info("{}", memory_summary(*ctx, model.weight_bytes()));
    } else if (*family == "h3") {
      if (want_dump && !o->dump_list.empty())
        log::info("--dump {}: the list selects MAGI-2 tensors; H3 dumps everything", o->dump_list);
      models::h3::H3Model model(*ctx, ckpt, act);
      model.set_fp16_fixes(models::parse_fp16_fixes(o->fp16_fix));
      out = models::h3::forward_from_inputs(model, inputs, want_dump);
      if (ctx->is_cuda()) log::info("{}", memory_summary(*ctx, model.weight_bytes()));
    } else {
      throw BadInput(fmt::format("{}: avdit forward does not run the {} family yet", o->model, *family));
    }
    ranges.finish(*ctx);
    write_safetensors(o->out, out);
    log::info("wrote {} tensors to {}", out.size(), o->out);
    return 0;
  };
}

}  // namespace avdit::app
