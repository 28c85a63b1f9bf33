// avdit: the command-line entry point. Subcommands live in cmd_*.cpp; errors become one line on
// stderr and an exit code (0 ok, 1 runtime failure, 2 bad usage or bad input).
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "core/log.h"

namespace {

// One line on stderr whatever a message quotes: names from files (tensor names, shard paths) may
// hold newlines or terminal escape sequences, so control characters are printed as \xNN.
void print_error(const std::string& message) {
  std::string line = "avdit: error: ";
  for (const unsigned char c : message) {
    if (c < 0x20 || c == 0x7f) {
      char esc[5];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      line += esc;
    } else {
      line += static_cast<char>(c);
    }
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "avdit runs audio-video diffusion transformers (MAGI-2 Preview, MiniMax-H3) and measures what\n"
      "each speed or memory knob costs in quality.\n\n"
      "Start with:  avdit inspect MODEL_DIR        (what a checkpoint or config holds)\n"
      "             avdit generate --help          (sample latents from text states)",
      "avdit"};
  app.require_subcommand(1);
  int verbose = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbose, "More log output (-vv for debug)");
  app.add_flag("-q,--quiet", quiet, "Only errors");
  std::vector<std::pair<CLI::App*, avdit::app::Run>> runs;
  auto add = [&](avdit::app::Run (*f)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    avdit::app::Run r = f(app);
    runs.emplace_back(app.get_subcommands({})[before], std::move(r));
  };
  add(avdit::app::add_inspect);
  add(avdit::app::add_forward);
  add(avdit::app::add_init);
  add(avdit::app::add_generate);
  add(avdit::app::add_bench);
  add(avdit::app::add_quantize);
  add(avdit::app::add_tokenize);
  add(avdit::app::add_enhance);
  add(avdit::app::add_encode);
  add(avdit::app::add_decode);
  add(avdit::app::add_score);
  add(avdit::app::add_routes);
  add(avdit::app::add_calibrate);
  add(avdit::app::add_probe);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    print_error(std::string(e.what()) + " (see --help)");
    return 2;
  }
  avdit::log::set_level(quiet ? avdit::log::Level::Error
                        : verbose >= 2 ? avdit::log::Level::Debug
                                       : avdit::log::Level::Info);
  try {
    for (auto& [sub, run] : runs)
      if (sub->parsed()) return run();
  } catch (const avdit::Error& e) {
    print_error(e.what());
    return e.exit_code();
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be examined (permissions, a loop of symlinks): name it.
    print_error(e.path1().string() + ": " + e.code().message());
    return 2;
  } catch (const std::bad_alloc&) {
    print_error("out of host memory");
    return 1;
  } catch (const std::exception& e) {
    // Input checks should have named the file or option; reaching here is a bug to report.
    print_error(std::string("internal error (please report): ") + e.what());
    return 1;
  }
  return 2;
}
