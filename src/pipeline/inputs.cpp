// Reading named tensors from user files with errors that say which file, which names and what is there.
#include "pipeline/inputs.h"

#include "core/error.h"
#include "io/finite.h"
#include "io/safetensors.h"

namespace avdit::pipeline {

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

LabeledTensor find_one_of(const TensorMap& tensors, const std::filesystem::path& file,
                          const std::vector<std::string>& names) {
  for (const auto& n : names) {
    auto it = tensors.find(n);
    if (it != tensors.end()) {
      LabeledTensor t{it->second, file.string() + ":" + n};
      require_finite(t.tensor, t.where);  // one NaN would make every output NaN
      return t;
    }
  }
  return {};
}

LabeledTensor read_one_of(const std::filesystem::path& file, const std::vector<std::string>& names,
                          const std::string& what) {
  AVDIT_REQUIRE(std::filesystem::exists(file), "{}: no such file (expected a .safetensors file with {})", file.string(),
                what);
  const TensorMap tensors = read_all(file);
  LabeledTensor t = find_one_of(tensors, file, names);
  if (!t.defined()) {
    std::vector<std::string> held;
    for (const auto& [name, _] : tensors) held.push_back(name);
    if (held.size() > 12) {
      held.resize(12);
      held.push_back("...");
    }
    throw BadInput(fmt::format("{}: no tensor named {} ({}); the file holds: {}", file.string(),
                               names.size() == 1 ? names[0] : "any of " + join_names(names), what,
                               held.empty() ? "nothing" : join_names(held)));
  }
  return t;
}

}  // namespace avdit::pipeline
