// Model families avdit knows, detected from a config or from tensor names, and what each can say
// about itself from its config alone (tensor list, parameter counts) for `avdit inspect`.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"

namespace avdit::models {

// "magi2-preview", "magi2-refiner" or "h3".
std::optional<std::string> detect_family(const nlohmann::json& config);
std::optional<std::string> detect_family_from_names(const std::vector<std::string>& names);

struct FamilyReport {
  std::vector<TensorDecl> tensors;  // every checkpoint tensor the config implies
  std::vector<std::pair<std::string, std::string>> facts;  // family-specific lines (shares, active params)
};
// What the config implies, or nullopt when the family has no description yet.
std::optional<FamilyReport> describe_family(const std::string& family, const nlohmann::json& config);

}  // namespace avdit::models
