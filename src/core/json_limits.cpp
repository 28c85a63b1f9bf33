// Depth-checked JSON parsing (see json_limits.h). The depth is measured on the text before
// nlohmann builds anything, so a deep file costs one linear scan and no allocation.
#include "core/json_limits.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace avdit {

int json_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_json(std::string_view text, std::string_view where, int max_depth) {
  AVDIT_REQUIRE(json_depth(text, max_depth) <= max_depth,
                "{}: JSON nested deeper than {} levels (not a config, index or header avdit reads)",
                where, max_depth);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for numbers such as 1e99999.
    throw BadInput(fmt::format("{}: malformed JSON: {}", where, e.what()));
  }
}

}  // namespace avdit
