// JSON from files with bounded nesting: nlohmann's DOM copies, compares and prints recursively, so
// a file of a million nested brackets would overflow the stack. Every JSON reader goes through
// here.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace avdit {

// Configs, indexes and safetensors headers nest a few levels; 64 leaves room and is far from the
// depth where recursion could exhaust a thread's stack.
inline constexpr int kMaxJsonDepth = 64;

// Nesting depth of JSON text (brackets outside strings); stops counting past `limit` + 1.
int json_depth(std::string_view text, int limit = kMaxJsonDepth);

// Parses `text`; BadInput naming `where` (a file) when it nests deeper than `max_depth` or is
// malformed (including numbers out of double's range).
nlohmann::json parse_json(std::string_view text, std::string_view where,
                          int max_depth = kMaxJsonDepth);

}  // namespace avdit
