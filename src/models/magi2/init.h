// The random-weight rule of the MAGI-2 preview family (init_checkpoint, random_weights): realistic
// scales per tensor role, so that activations neither vanish nor explode at any size.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/tensor.h"
#include "models/tensor_spec.h"

namespace avdit::models::magi2 {

// Gain of a linear weight by its role (std = gain / sqrt(fan_in)); 0 when the name is not a linear
// weight.
double init_linear_gain(std::string_view name);

// The tensor of `spec` (its shape and dtype) by the rule; values depend only on (seed, name,
// index).
Tensor init_tensor(const TensorSpec& spec, uint64_t seed);

}  // namespace avdit::models::magi2
