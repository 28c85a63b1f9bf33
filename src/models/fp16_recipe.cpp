#include "models/fp16_recipe.h"

#include <sstream>
#include <vector>

#include "core/error.h"

namespace avdit::models {

Fp16Fixes parse_fp16_fixes(const std::string& list) {
  if (list == "all") return {};
  if (list == "none") return Fp16Fixes::none();
  Fp16Fixes f = Fp16Fixes::none();
  std::stringstream ss(list);
  std::string word;
  bool any = false;
  while (std::getline(ss, word, ',')) {
    if (word == "residual")
      f.residual = true;
    else if (word == "rowscale")
      f.rowscale = true;
    else if (word == "gating")
      f.gating = true;
    else if (word == "reduction")
      f.reduction = true;
    else if (word == "gate")
      f.gate = true;
    else
      throw BadInput("--fp16-fix " + list + ": unknown fix '" + word +
                     "' (expected all, none, or a list of " + kFp16FixNames + ")");
    any = true;
  }
  AVDIT_REQUIRE(any, "--fp16-fix '{}': expected all, none, or a list of {}", list, kFp16FixNames);
  return f;
}

std::string fp16_fixes_str(const Fp16Fixes& f) {
  if (f == Fp16Fixes{}) return "all";
  if (f == Fp16Fixes::none()) return "none";
  std::vector<const char*> on;
  if (f.residual) on.push_back("residual");
  if (f.rowscale) on.push_back("rowscale");
  if (f.gating) on.push_back("gating");
  if (f.reduction) on.push_back("reduction");
  if (f.gate) on.push_back("gate");
  std::string s;
  for (const char* n : on) s += (s.empty() ? "" : ",") + std::string(n);
  return s;
}

}  // namespace avdit::models
