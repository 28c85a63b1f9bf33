// Tensors handed to the generate pipelines together with where they came from ("file:tensor"), so
// every shape or width error can name the file and tensor the user has to fix.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace avdit::pipeline {

struct LabeledTensor {
  Tensor tensor;      // undefined when not given
  std::string where;  // e.g. "prompt.safetensors:text_embeds"
  bool defined() const { return tensor.defined(); }
};

// The first of `names` present in `file` (read with read_all). BadInput names the file, the names
// accepted and the tensors the file does hold. `what` says what the tensor is for ("text states").
LabeledTensor read_one_of(const std::filesystem::path& file, const std::vector<std::string>& names,
                          const std::string& what);
// Same on an already read file; returns an undefined tensor when none is present.
LabeledTensor find_one_of(const TensorMap& tensors, const std::filesystem::path& file,
                          const std::vector<std::string>& names);

// "[a, b, c]" lists for messages.
std::string join_names(const std::vector<std::string>& names);

}  // namespace avdit::pipeline
