// Subcommands whose model code is still being wired (temporary; replaced as each lands).
#include "commands.h"
#include "core/error.h"

namespace avdit::app {

Run add_forward(CLI::App& app) {
  app.add_subcommand("forward", "One model forward on fixture-format inputs");
  return [] { throw RuntimeFailure("forward: not wired yet"); return 1; };
}
Run add_init(CLI::App& app) {
  app.add_subcommand("init", "Write a random-weight checkpoint for a config");
  return [] { throw RuntimeFailure("init: not wired yet"); return 1; };
}
Run add_generate(CLI::App& app) {
  app.add_subcommand("generate", "Sample latents");
  return [] { throw RuntimeFailure("generate: not wired yet"); return 1; };
}

}  // namespace avdit::app
