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

namespace avdit::app {

namespace fs = std::filesystem;

Run add_init(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "init",
      "Write a random-weight checkpoint (official names, layouts, dtypes; sharded with an index\n"
      "when large) for a config. Values depend only on the seed, the tensor name and the element.\n"
      "Example: avdit init --family h3 --config ../shared/golden/h3-tiny/config.json --out /tmp/h3");
  struct Opts {
    std::string family, config, out;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--family", o->family, "magi2 or h3 (default: detected from the config)")
      ->check(CLI::IsMember({"magi2", "h3"}));
  cmd->add_option("--config", o->config, "A config .json of the family")->required()->check(CLI::ExistingFile);
  cmd->add_option("--out", o->out, "Output folder (created)")->required();
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  return [o]() {
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
