// Progress bar (see progress.h).
#include "core/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace avdit {

Progress::Progress(int64_t total, std::string label)
    : total_(total), label_(std::move(label)), tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  if (!finished_ && done_ > 0) finish();
}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::tick(int64_t n) {
  done_ += n;
  draw(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void Progress::draw(bool final) {
  const double s = seconds();
  const double per = done_ > 0 ? s / static_cast<double>(done_) : 0.0;
  const double frac = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  if (tty_) {
    const int width = 30, filled = static_cast<int>(frac * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r%s [%s] %lld/%lld  %.2f s/it  %.1f s%s", label_.c_str(), bar.c_str(),
                 static_cast<long long>(done_), static_cast<long long>(total_), per, s,
                 final ? "\n" : "");
    std::fflush(stderr);
    return;
  }
  const int decile = static_cast<int>(frac * 10);
  if ((decile != last_decile_ || final) && done_ != last_printed_) {
    last_decile_ = decile;
    last_printed_ = done_;
    std::fprintf(stderr, "%s %lld/%lld  %.2f s/it  %.1f s\n", label_.c_str(),
                 static_cast<long long>(done_), static_cast<long long>(total_), per, s);
  }
}

}  // namespace avdit
