// Bit-level conversions for the float formats avdit stores: fp16, bf16, fp8 e4m3, fp4 e2m1.
#include "core/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "core/checked.h"
#include "core/error.h"

namespace avdit {

namespace {

struct DTypeRow {
  DType dtype;
  std::string_view name;
  int bits;
  bool is_float;
};

constexpr DTypeRow kDTypes[] = {
    {DType::F64, "F64", 64, true},         {DType::F32, "F32", 32, true},
    {DType::F16, "F16", 16, true},         {DType::BF16, "BF16", 16, true},
    {DType::F8_E4M3, "F8_E4M3", 8, true},  {DType::E2M1, "E2M1", 4, true},
    {DType::U8, "U8", 8, false},           {DType::I8, "I8", 8, false},
    {DType::I16, "I16", 16, false},        {DType::I32, "I32", 32, false},
    {DType::I64, "I64", 64, false},        {DType::Bool, "BOOL", 8, false},
};

const DTypeRow& row(DType dtype) {
  for (const auto& r : kDTypes)
    if (r.dtype == dtype) return r;
  throw RuntimeFailure("unknown dtype enum value");
}

// Encodes |x| (finite, non-NaN) into a small float format with `ebits` exponent bits, `mbits`
// mantissa bits and `bias`, rounding to nearest even. Returns the magnitude code, which may exceed
// max_code when the value overflows; the caller decides what overflow means. Computed in double,
// where every intermediate is exact.
uint32_t encode_small_float(double a, int mbits, int bias) {
  if (a == 0) return 0;
  const double min_normal = std::ldexp(1.0, 1 - bias);
  if (a < min_normal) {
    // Subnormal: count units of 2^(1 - bias - mbits); a count of 2^mbits is the smallest normal.
    return static_cast<uint32_t>(std::nearbyint(std::ldexp(a, bias - 1 + mbits)));
  }
  int e;
  const double frac = std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  e -= 1;                                 // a = (2 frac) * 2^e, 2 frac in [1, 2)
  double q = std::nearbyint((2 * frac - 1) * std::ldexp(1.0, mbits));
  if (q == std::ldexp(1.0, mbits)) {
    q = 0;
    e += 1;
  }
  const double code = std::ldexp(static_cast<double>(e + bias), mbits) + q;
  return code > 1e9 ? 0xffffffffu : static_cast<uint32_t>(code);
}

double decode_small_float(uint32_t mag, int mbits, int bias) {
  const uint32_t e = mag >> mbits;
  const uint32_t m = mag & ((1u << mbits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - bias - mbits);
  return std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -mbits), static_cast<int>(e) - bias);
}

}  // namespace

std::string_view dtype_name(DType dtype) { return row(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& r : kDTypes)
    if (r.name == name && r.dtype != DType::E2M1) return r.dtype;
  return std::nullopt;
}

int dtype_bits(DType dtype) { return row(dtype).bits; }
bool dtype_is_float(DType dtype) { return row(dtype).is_float; }

int64_t dtype_nbytes(DType dtype, int64_t numel) {
  const std::optional<int64_t> n = checked::nbytes(numel, dtype_bits(dtype));
  if (n) return *n;
  AVDIT_CHECK(numel >= 0, "dtype_nbytes of {} elements", numel);
  throw BadInput(
      fmt::format("{} elements of {} exceed the 2^56-element limit (a size from a file, "
                  "config or option is implausible)",
                  numel, dtype_name(dtype)));
}

uint16_t f32_to_f16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, quiet
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to Inf
  if (a < 0x38800000u) {  // below 2^-14: fp16 subnormal or zero, in units of 2^-24
    const uint32_t e = a >> 23;
    const uint32_t shift = 126 - e;  // m * 2^(e - 150) / 2^-24 = m >> (126 - e)
    if (shift > 24) return static_cast<uint16_t>(sign);
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = (a - (112u << 23)) >> 13;  // rebias 127 -> 15, drop 13 mantissa bits
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | r);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t f32_to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  const uint32_t r = u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(r >> 16);
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint8_t f32_to_e4m3(float x, bool saturate) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | 0x7f;
  const uint32_t kMax = 0x7e;  // 448
  if (std::isinf(x)) return saturate ? (sign | kMax) : (sign | 0x7f);
  const uint32_t code = encode_small_float(std::fabs(static_cast<double>(x)), 3, 7);
  if (code > kMax) return saturate ? (sign | kMax) : (sign | 0x7f);
  return static_cast<uint8_t>(sign | code);
}

float e4m3_to_f32(uint8_t v) {
  const uint32_t mag = v & 0x7fu;
  if (mag == 0x7f) return std::numeric_limits<float>::quiet_NaN() * ((v & 0x80) ? -1.f : 1.f);
  const float a = static_cast<float>(decode_small_float(mag, 3, 7));
  return (v & 0x80) ? -a : a;
}

uint8_t f32_to_e2m1(float x) {
  if (std::isnan(x)) return 0x7;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0;
  if (std::isinf(x)) return sign | 0x7;
  const uint32_t code = encode_small_float(std::fabs(static_cast<double>(x)), 1, 1);
  return static_cast<uint8_t>(sign | (code > 0x7 ? 0x7 : code));
}

float e2m1_to_f32(uint8_t nibble) {
  const float a = static_cast<float>(decode_small_float(nibble & 0x7u, 1, 1));
  return (nibble & 0x8) ? -a : a;
}

namespace {

double load_float(const void* p, DType dt, int64_t i) {
  switch (dt) {
    case DType::F64: return static_cast<const double*>(p)[i];
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::F8_E4M3: return e4m3_to_f32(static_cast<const uint8_t*>(p)[i]);
    case DType::U8: return static_cast<const uint8_t*>(p)[i];
    case DType::I8: return static_cast<const int8_t*>(p)[i];
    case DType::I16: return static_cast<const int16_t*>(p)[i];
    case DType::I32: return static_cast<const int32_t*>(p)[i];
    case DType::I64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::Bool: return static_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
    case DType::E2M1: break;
  }
  throw RuntimeFailure("convert: E2M1 is packed; use the NVFP4 routines");
}

void store_float(void* p, DType dt, int64_t i, double v) {
  switch (dt) {
    case DType::F64: static_cast<double*>(p)[i] = v; return;
    case DType::F32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::F16: static_cast<uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v)); return;
    case DType::BF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v)); return;
    case DType::F8_E4M3: static_cast<uint8_t*>(p)[i] = f32_to_e4m3(static_cast<float>(v)); return;
    case DType::U8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case DType::I8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;
    case DType::I16: static_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); return;
    case DType::I32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DType::I64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); return;
    case DType::Bool: static_cast<uint8_t*>(p)[i] = v != 0; return;
    case DType::E2M1: break;
  }
  throw RuntimeFailure("convert: E2M1 is packed; use the NVFP4 routines");
}

}  // namespace

void convert(const void* src, DType sdt, void* dst, DType ddt, int64_t n) {
  if (sdt == ddt) {
    std::memcpy(dst, src, static_cast<size_t>(dtype_nbytes(sdt, n)));
    return;
  }
  // The hot paths (weights to float32) avoid the generic double round trip.
  if (ddt == DType::F32 && sdt == DType::BF16) {
    const auto* s = static_cast<const uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]);
    return;
  }
  if (ddt == DType::F32 && sdt == DType::F16) {
    const auto* s = static_cast<const uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = f16_to_f32(s[i]);
    return;
  }
  const bool int_to_int = !dtype_is_float(sdt) && !dtype_is_float(ddt) && sdt != DType::Bool &&
                          ddt != DType::Bool;
  if (int_to_int && (sdt == DType::I64 || ddt == DType::I64)) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = 0;
      switch (sdt) {
        case DType::U8: v = static_cast<const uint8_t*>(src)[i]; break;
        case DType::I8: v = static_cast<const int8_t*>(src)[i]; break;
        case DType::I16: v = static_cast<const int16_t*>(src)[i]; break;
        case DType::I32: v = static_cast<const int32_t*>(src)[i]; break;
        default: v = static_cast<const int64_t*>(src)[i]; break;
      }
      switch (ddt) {
        case DType::U8: static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(v); break;
        case DType::I8: static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(v); break;
        case DType::I16: static_cast<int16_t*>(dst)[i] = static_cast<int16_t>(v); break;
        case DType::I32: static_cast<int32_t*>(dst)[i] = static_cast<int32_t>(v); break;
        default: static_cast<int64_t*>(dst)[i] = v; break;
      }
    }
    return;
  }
  // Float targets other than F64 go through float so that fp16/bf16/e4m3 round exactly once.
  const bool via_float = ddt != DType::F64 && dtype_is_float(ddt) && sdt != DType::F64;
  for (int64_t i = 0; i < n; ++i) {
    const double v = load_float(src, sdt, i);
    store_float(dst, ddt, i, via_float ? static_cast<double>(static_cast<float>(v)) : v);
  }
}

}  // namespace avdit
