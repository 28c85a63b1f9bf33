// TensorSpec: one checkpoint tensor (official name, shape, dtype) as a model family declares it.
// Shared by loading validation, `avdit init` (random checkpoints) and `avdit inspect` (parameter counts).
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/tensor.h"
#include "io/safetensors.h"

namespace avdit::models {

// The same record the checkpoint writer takes, so specs go straight to write_checkpoint_sharded.
using TensorSpec = ::avdit::TensorDecl;

// Number of elements of the tensor the spec describes (1 for a scalar / empty shape).
inline int64_t numel(const TensorSpec& spec) { return shape_numel(spec.shape); }

}  // namespace avdit::models
