// TensorSpec: one checkpoint tensor (official name, shape, dtype) as a model family declares it.
// Shared by loading validation, `avdit init` (random checkpoints) and `avdit inspect` (parameter counts).
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/tensor.h"

namespace avdit::models {

struct TensorSpec {
  std::string name;
  Shape shape;
  DType dtype;
};

// Number of elements of the tensor the spec describes (1 for a scalar / empty shape).
inline int64_t numel(const TensorSpec& spec) {
  int64_t n = 1;
  for (int64_t d : spec.shape) n *= d;
  return n;
}

}  // namespace avdit::models
