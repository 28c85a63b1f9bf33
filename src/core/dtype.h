// Element types of tensors and checkpoints, and exact conversions between them.
// Every float conversion rounds to nearest, ties to even, and treats NaN, Inf and subnormals as
// IEEE 754 (and the OCP FP8 / NVFP4 specifications for e4m3 and e2m1) say.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace avdit {

enum class DType : uint8_t { F64, F32, F16, BF16, F8_E4M3, E2M1, U8, I8, I16, I32, I64, Bool };

// The safetensors name ("F32", "BF16", "F8_E4M3", "BOOL", ...). E2M1 is "E2M1": it is never
// written to files (packed NVFP4 values are stored as U8 pairs).
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);
int dtype_bits(DType dtype);
// Bytes for numel elements; E2M1 packs two per byte (rounded up).
int64_t dtype_nbytes(DType dtype, int64_t numel);
bool dtype_is_float(DType dtype);

// Scalar conversions. f32_to_e4m3 saturates to +-448 when `saturate` (the TransformerEngine
// recipe), else overflows to NaN (e4m3 has no infinity). e2m1 has neither NaN nor infinity: it
// always saturates to +-6 and maps NaN to +6 (what the PTX cvt.rn.satfinite.e2m1x2 does).
uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float x);
float bf16_to_f32(uint16_t h);
uint8_t f32_to_e4m3(float x, bool saturate = true);
float e4m3_to_f32(uint8_t v);
uint8_t f32_to_e2m1(float x);  // the 4-bit code in the low nibble
float e2m1_to_f32(uint8_t nibble);

// Converts n elements between any two non-packed dtypes (E2M1 is handled by the NVFP4 code).
// Floats go through float (double for F64); integers through int64.
void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n);

}  // namespace avdit
