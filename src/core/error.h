// Errors a user can act on. BadInput (exit 2) is for bad usage and bad files; RuntimeFailure
// (exit 1) for everything that went wrong while running. Messages name the file, the tensor and
// what was expected.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace avdit {

class Error : public std::runtime_error {
 public:
  Error(std::string message, int exit_code)
      : std::runtime_error(std::move(message)), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Bad usage or bad input: a truncated file, a missing tensor, a wrong shape. Exit code 2.
class BadInput : public Error {
 public:
  explicit BadInput(std::string message) : Error(std::move(message), 2) {}
};

// A failure while running (an internal invariant, a device error). Exit code 1.
class RuntimeFailure : public Error {
 public:
  explicit RuntimeFailure(std::string message) : Error(std::move(message), 1) {}
};

}  // namespace avdit

// Internal invariant: a violation is a bug in avdit.
#define AVDIT_CHECK(cond, ...)                                                          \
  do {                                                                                  \
    if (!(cond))                                                                        \
      throw ::avdit::RuntimeFailure(fmt::format("internal error at {}:{}: {}", __FILE__, \
                                                __LINE__, fmt::format(__VA_ARGS__)));   \
  } while (0)

// User-facing input check: the message must say what was expected and what to do.
#define AVDIT_REQUIRE(cond, ...)                                      \
  do {                                                                \
    if (!(cond)) throw ::avdit::BadInput(fmt::format(__VA_ARGS__)); \
  } while (0)
