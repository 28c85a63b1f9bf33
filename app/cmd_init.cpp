// `avdit init`: a random-weight checkpoint in the official names, layouts and dtypes for any
// config of a family; tests, the README demo and full-size benchmarks use it.
#include <filesystem>

#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "models/family.h"
#include "models/h3/api.h"
#include "models/magi2/api.h"
#include "pipeline/init_pipeline.h"

namespace avdit::app {

namespace fs = std::filesystem;

Run add_init(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "init",
      "Write a random-weight checkpoint (official names, layouts, dtypes; sharded with an index\n"
      "when large) for a config. Values depend only on the seed, the tensor name and the element.\n"
      "Example: avdit init --family h3 --config ../shared/golden/h3-tiny/config.json --out /tmp/h3\n"
      "         avdit init --pipeline h3 --size tiny --out /tmp/tiny-h3\n"
      "         avdit init --pipeline magi2 --size full --configs-only --out /tmp/magi2-configs");
  struct Opts {
    std::string family, config, out, pipeline, size = "tiny", shared = AVDIT_SHARED_DIR;
    uint64_t seed = 0;
    bool configs_only = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--family", o->family, "magi2 or h3 (default: detected from the config)")
      ->check(CLI::IsMember({"magi2", "h3"}));
  auto* config = cmd->add_option("--config", o->config, "A config .json of the family (one checkpoint)")
                     ->check(CLI::ExistingFile);
  auto* pipeline = cmd->add_option("--pipeline", o->pipeline,
                                   "A whole pipeline folder in the release's layout instead: h3 or magi2 "
                                   "(then `avdit generate --model DIR --prompt ...` runs it)")
                       ->check(CLI::IsMember({"magi2", "h3"}))
                       ->excludes(config);
  cmd->add_option("--size", o->size,
                  "With --pipeline: tiny, or full (the release's configs; with --configs-only)")
      ->check(CLI::IsMember({"tiny", "full"}))
      ->needs(pipeline)
      ->capture_default_str();
  cmd->add_option("--shared", o->shared, "With --pipeline: the folder of golden/ and reference-configs/")
      ->needs(pipeline)
      ->capture_default_str();
  cmd->add_flag("--configs-only", o->configs_only,
                "With --pipeline: the configs and tokenizer files alone, no weight files (a folder "
                "for `avdit generate --random-weights`)")
      ->needs(pipeline);
  cmd->add_option("--out", o->out, "Output folder (created)")->required();
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  return [o]() {
    if (!o->pipeline.empty()) {
      pipeline::InitPipelineOptions p;
      p.family = o->pipeline == "h3" ? pipeline::PipelineFamily::H3 : pipeline::PipelineFamily::Magi2;
      p.shared = o->shared;
      p.out = o->out;
      p.seed = o->seed;
      p.configs_only = o->configs_only;
      if (o->size == "full") {
        AVDIT_REQUIRE(
            o->configs_only,
            "--size full: the release-size checkpoints are 66-230 GB; write the configs "
            "alone with --configs-only and run them with `avdit generate --random-weights`");
        pipeline::init_full_pipeline_configs(p);
      } else {
        pipeline::init_tiny_pipeline(p);
      }
      log::info("wrote a {} {} pipeline{} to {}", o->size, o->pipeline,
                o->configs_only ? " (configs only)" : "", o->out);
      return 0;
    }
    AVDIT_REQUIRE(!o->config.empty(), "init: give --config FILE (one checkpoint) or --pipeline h3|magi2");
    const auto config = read_json(o->config);
    const auto detected = models::detect_family(config);
    std::string family = o->family;
    if (family.empty()) {
      AVDIT_REQUIRE(detected, "{}: cannot tell the family from this config; pass --family magi2 or h3", o->config);
      family = *detected == "h3" ? "h3" : "magi2";
    }
    AVDIT_REQUIRE(!detected || (family == "h3") == (*detected == "h3"),
                  "{}: this is a {} config, not {}", o->config, *detected, family);
    AVDIT_REQUIRE(!fs::exists(fs::path(o->out) / "config.json"),
                  "{}: already holds a model; choose an empty folder", o->out);
    if (family == "magi2") {
      AVDIT_REQUIRE(!detected || *detected == "magi2-preview", "{}: only the MAGI-2 preview is supported by init",
                    o->config);
      models::magi2::init_checkpoint(config, o->out, o->seed);
    } else {
      models::h3::init_checkpoint(config, o->out, o->seed);
    }
    log::info("wrote a random {} checkpoint to {}", family, o->out);
    return 0;
  };
}

}  // namespace avdit::app
