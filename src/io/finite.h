// NaN and Inf in inputs: a single NaN in text states, noise or a guidance scale turns every output
// into NaN with exit 0, so inputs are checked before the work and the tensor or option is named.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "core/tensor.h"

namespace avdit {

// Flat index of the first NaN or Inf element of a CPU float tensor; nullopt when every element is
// finite or the dtype is an integer type.
std::optional<int64_t> first_non_finite(const Tensor& t);

// BadInput "WHERE: element [i, j, ...] is NaN ..." when `t` holds a NaN or Inf.
void require_finite(const Tensor& t, std::string_view where);
// Every tensor of a file (named "FILE:TENSOR" in the message).
void require_finite(const TensorMap& tensors, const std::filesystem::path& file);
// A numeric option such as --guidance or --shift.
void require_finite_option(double value, std::string_view option);

}  // namespace avdit
