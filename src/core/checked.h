// Size arithmetic that cannot wrap: element and byte counts of shapes that come from files,
// configs and options. Every function returns nullopt instead of a wrapped or implausible value,
// so callers can name the file, tensor or field in their own error.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace avdit::checked {

// No dimension and no element count above 2^56: the byte count of any dtype (at most 64 bits per
// element) then stays below 2^59, and sums of a few such counts stay far from int64's limit.
inline constexpr int64_t kMaxElements = int64_t{1} << 56;
inline constexpr int64_t kMaxBytes = kMaxElements * 8;

inline std::optional<int64_t> mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> add(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The element count of `dims`, or nullopt when a dimension is negative or above kMaxElements, or
// when the product of the non-zero dimensions exceeds kMaxElements: a zero dimension does not
// excuse a huge one ([0, 2^63] is refused, not counted as empty).
inline std::optional<int64_t> numel(std::span<const int64_t> dims) {
  int64_t nonzero = 1;
  bool empty = false;
  for (const int64_t d : dims) {
    if (d < 0 || d > kMaxElements) return std::nullopt;
    if (d == 0) {
      empty = true;
      continue;
    }
    const auto p = mul(nonzero, d);
    if (!p || *p > kMaxElements) return std::nullopt;
    nonzero = *p;
  }
  return empty ? 0 : nonzero;
}

// Bytes of `count` elements of `bits` bits each (rounded up to whole bytes), or nullopt when
// `count` is negative or above kMaxElements.
inline std::optional<int64_t> nbytes(int64_t count, int bits) {
  if (count < 0 || count > kMaxElements || bits <= 0 || bits > 64) return std::nullopt;
  return (count * bits + 7) / 8;  // < 2^62: cannot wrap
}

}  // namespace avdit::checked
