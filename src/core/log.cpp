// Levelled logging to stderr.
#include "core/log.h"

#include <atomic>
#include <cstdio>

namespace avdit::log {

namespace {
std::atomic<Level> g_level{Level::Info};
}

void set_level(Level l) { g_level.store(l); }
Level level() { return g_level.load(); }

void write(Level l, std::string_view message) {
  static constexpr const char* kTags[] = {"debug", "info", "warning", "error", ""};
  std::fprintf(stderr, "avdit %s: %.*s\n", kTags[static_cast<int>(l)],
               static_cast<int>(message.size()), message.data());
}

}  // namespace avdit::log
