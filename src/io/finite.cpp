// Finiteness checks of inputs (see finite.h). The F32 path tests exponent bits, so a check costs
// one pass over the data at memory speed.
#include "io/finite.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace avdit {

namespace {

template <class Bits, class IsBad>
std::optional<int64_t> scan(const Tensor& t, IsBad bad) {
  const auto* p = static_cast<const Bits*>(t.raw());
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, p + i, sizeof(Bits));  // mapped tensors may be misaligned copies' sources
    if (bad(v)) return i;
  }
  return std::nullopt;
}

std::string index_str(const Shape& shape, int64_t flat) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  return shape_str(idx);
}

}  // namespace

std::optional<int64_t> first_non_finite(const Tensor& t) {
  AVDIT_CHECK(t.device() == Device::CPU, "first_non_finite on a device tensor");
  switch (t.dtype()) {
    case DType::F32:
      return scan<uint32_t>(t, [](uint32_t v) { return (v & 0x7f800000u) == 0x7f800000u; });
    case DType::F64:
      return scan<uint64_t>(
          t, [](uint64_t v) { return (v & 0x7ff0000000000000ull) == 0x7ff0000000000000ull; });
    case DType::F16: return scan<uint16_t>(t, [](uint16_t v) { return (v & 0x7c00u) == 0x7c00u; });
    case DType::BF16: return scan<uint16_t>(t, [](uint16_t v) { return (v & 0x7f80u) == 0x7f80u; });
    case DType::F8_E4M3:  // no infinity; NaN is S.1111.111
      return scan<uint8_t>(t, [](uint8_t v) { return (v & 0x7fu) == 0x7fu; });
    default: return std::nullopt;  // integers, bool, packed e2m1 (which has no NaN)
  }
}

void require_finite(const Tensor& t, std::string_view where) {
  const std::optional<int64_t> i = first_non_finite(t);
  if (!i) return;
  const Tensor one = Tensor::from_data(
      {1}, t.dtype(), static_cast<const char*>(t.raw()) + dtype_nbytes(t.dtype(), *i));
  const double v = static_cast<double>(one.to_f32().f32()[0]);
  throw BadInput(fmt::format("{}: element {} of shape {} is {}; inputs must be finite", where,
                             index_str(t.shape(), *i), t.shape_str(),
                             std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf")));
}

void require_finite(const TensorMap& tensors, const std::filesystem::path& file) {
  for (const auto& [name, t] : tensors) require_finite(t, file.string() + ":" + name);
}

void require_finite_option(double value, std::string_view option) {
  AVDIT_REQUIRE(std::isfinite(value), "{} {}: must be a finite number", option, value);
}

}  // namespace avdit
