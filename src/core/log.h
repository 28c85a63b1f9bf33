// Levelled logging to stderr. The level is set once by the command line (-v, -q); library code
// only logs, it never decides the level. Held in one atomic: the only process-wide setting.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace avdit::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3, Quiet = 4 };

void set_level(Level level);
Level level();
void write(Level level, std::string_view message);

template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Debug) write(Level::Debug, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Info) write(Level::Info, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Warn) write(Level::Warn, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Error) write(Level::Error, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace avdit::log
