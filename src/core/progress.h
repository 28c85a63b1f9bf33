// A progress bar for long work: redrawn in place on a terminal, plain lines (at most one per
// 10 %) when stderr is a pipe or a file, so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace avdit {

class Progress {
 public:
  Progress(int64_t total, std::string label);
  ~Progress();
  void tick(int64_t n = 1);
  void finish();
  double seconds() const;

 private:
  void draw(bool final);

  int64_t total_, done_ = 0, last_printed_ = -1;
  int last_decile_ = -1;
  std::string label_;
  bool tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace avdit
