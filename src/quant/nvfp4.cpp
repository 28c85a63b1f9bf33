// NVFP4 quantisation of expert stacks: the scalar recipe (see nvfp4.h for the exact operations),
// the packed K-major layout, and a separate unpacked fake-quantisation path to check it against.
#include "quant/nvfp4.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"

namespace avdit::quant {

float nvfp4_global_scale(float amax) {
  // 448 (e4m3 max) * 6 (e2m1 max) = 2688: the largest block amax maps to the largest block scale
  // times the largest value. As TE: an overflowing S is clamped to FLT_MAX (an amax below ~8e-36),
  // and a zero matrix keeps S = 1 (S == 0 cannot happen for finite amax; TE also maps it to 1).
  if (amax == 0.f) return 1.f;
  const float s = std::fmin(2688.f / amax, std::numeric_limits<float>::max());
  return s == 0.f ? 1.f : s;
}

uint8_t nvfp4_block_scale(float block_amax, float global_scale) {
  // TE: block_amax * (S_enc * (1/6)), the reciprocal of 6 folded into the global scale (three
  // roundings: the constant, the product with S, the product with the block amax).
  constexpr float kInv6 = 1.f / 6.f;
  const float scaled = block_amax * (global_scale * kInv6);
  return f32_to_e4m3(std::fmin(scaled, std::numeric_limits<float>::max()), /*saturate=*/true);
}

float nvfp4_block_encode_scale(uint8_t block_scale, float global_scale) {
  // TE: S_dec = 1 / S_enc (the global decode scale), then 1 / (bs * S_dec), clamped. A block scale
  // that underflowed to 0 (a block far below the matrix amax, or a zero block) gives FLT_MAX.
  const float global_decode = 1.f / global_scale;
  return std::fmin(1.f / (e4m3_to_f32(block_scale) * global_decode), std::numeric_limits<float>::max());
}

uint8_t nvfp4_e2m1_rn(float v) {
  // Round to nearest even onto {0, 0.5, 1, 1.5, 2, 3, 4, 6} by the midpoints (0.25, 0.75, 1.25, 1.75,
  // 2.5, 3.5, 5; a tie goes to the even code: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2,
  // 3.5 -> 4, 5 -> 4), saturating at 6; the sign is kept (code 8 is -0). The same table TE's emulation
  // uses, and ~30x faster than the generic f32_to_e2m1 (which the tests check it against).
  const uint8_t sign = std::signbit(v) ? 0x8 : 0;
  const float a = std::fabs(v);
  uint8_t c;
  if (a <= 0.25f) c = 0;
  else if (a < 0.75f) c = 1;
  else if (a <= 1.25f) c = 2;
  else if (a < 1.75f) c = 3;
  else if (a <= 2.5f) c = 4;
  else if (a < 3.5f) c = 5;
  else if (a <= 5.f) c = 6;
  else c = 7;  // (5, inf]: saturate to 6
  return static_cast<uint8_t>(sign | c);
}

uint8_t nvfp4_encode(float x, float encode_scale) { return nvfp4_e2m1_rn(x * encode_scale); }

float nvfp4_decode(uint8_t code, uint8_t block_scale, float global_scale) {
  return (e2m1_to_f32(code) * e4m3_to_f32(block_scale)) / global_scale;
}

namespace {

struct Dims {
  int64_t g, k, n;
};

Dims check_input(const Tensor& w, int reduce_dim) {
  AVDIT_REQUIRE(w.dtype() == DType::F32 || w.dtype() == DType::BF16,
                "NVFP4 quantisation takes F32 or BF16 weights, got {} {}", dtype_name(w.dtype()),
                w.shape_str());
  AVDIT_REQUIRE(w.ndim() == 2 || w.ndim() == 3,
                "NVFP4 quantisation takes a [K, N] matrix or a [G, K, N] stack, got {}", w.shape_str());
  AVDIT_REQUIRE(reduce_dim == w.ndim() - 2,
                "NVFP4 blocks run along the reduction dimension K = dim {} of {} ([in, out] storage), "
                "got reduce_dim {}",
                w.ndim() - 2, w.shape_str(), reduce_dim);
  const Dims d{w.ndim() == 3 ? w.size(0) : 1, w.size(w.ndim() - 2), w.size(w.ndim() - 1)};
  AVDIT_REQUIRE(d.k % kNvfp4Block == 0,
                "NVFP4 needs the reduction dimension K to be a multiple of {}, got K = {} in {} "
                "(keep this tensor in bf16, or pad K with zeros)",
                kNvfp4Block, d.k, w.shape_str());
  return d;
}

// Expert g of w as F32 [K, N] (bf16 widens exactly); a view when w is already F32.
const float* expert_f32(const Tensor& w, const Dims& d, int64_t g, std::vector<float>& buf) {
  const Tensor& c = w;
  const int64_t count = d.k * d.n;
  if (c.dtype() == DType::F32) return c.f32() + g * count;
  buf.resize(static_cast<size_t>(count));
  convert(c.data<uint16_t>() + g * count, DType::BF16, buf.data(), DType::F32, count);
  return buf.data();
}

float matrix_amax(const float* x, int64_t count, const Tensor& w, int64_t g) {
  float amax = 0.f;
  for (int64_t i = 0; i < count; ++i) {
    const float a = std::fabs(x[i]);
    AVDIT_REQUIRE(std::isfinite(a), "NVFP4 quantisation: {} has a non-finite value (expert {}, element {})",
                  w.shape_str(), g, i);
    amax = std::max(amax, a);
  }
  return amax;
}

// Per K-block of one [K, N] matrix: the block amax of every column (rows 16 b .. 16 b + 15).
void block_amax_row(const float* x, int64_t n, int64_t b, std::vector<float>& amax) {
  std::fill(amax.begin(), amax.end(), 0.f);
  for (int64_t i = 0; i < kNvfp4Block; ++i) {
    const float* row = x + (b * kNvfp4Block + i) * n;
    for (int64_t j = 0; j < n; ++j) amax[j] = std::max(amax[j], std::fabs(row[j]));
  }
}

}  // namespace

Nvfp4Matrix quantize_nvfp4(const Tensor& w, int reduce_dim) {
  const Dims d = check_input(w, reduce_dim);
  const int64_t nb = d.k / kNvfp4Block;
  Nvfp4Matrix m;
  m.shape = w.shape();
  m.reduce_dim = reduce_dim;
  m.values = Tensor::empty({d.g, d.n, d.k / 2}, DType::U8);
  m.block_scales = Tensor::empty({d.g, d.n, nb}, DType::F8_E4M3);
  m.global_scales = Tensor::empty({d.g}, DType::F32);
  uint8_t* values = m.values.data<uint8_t>();
  uint8_t* scales = m.block_scales.data<uint8_t>();
  float* globals = m.global_scales.f32();

  std::vector<float> buf, amax(static_cast<size_t>(d.n)), inv(static_cast<size_t>(d.n));
  for (int64_t g = 0; g < d.g; ++g) {
    const float* x = expert_f32(w, d, g, buf);
    const float s = nvfp4_global_scale(matrix_amax(x, d.k * d.n, w, g));
    globals[g] = s;
    uint8_t* vg = values + g * d.n * (d.k / 2);
    uint8_t* sg = scales + g * d.n * nb;
    // Row-major input, K-major output: walk K-block rows so the reads stay contiguous.
    for (int64_t b = 0; b < nb; ++b) {
      block_amax_row(x, d.n, b, amax);
      for (int64_t j = 0; j < d.n; ++j) {
        const uint8_t bs = nvfp4_block_scale(amax[j], s);
        sg[j * nb + b] = bs;
        inv[j] = nvfp4_block_encode_scale(bs, s);
      }
      for (int64_t i = 0; i < kNvfp4Block; i += 2) {
        const int64_t k = b * kNvfp4Block + i;
        const float* r0 = x + k * d.n;
        const float* r1 = r0 + d.n;
        for (int64_t j = 0; j < d.n; ++j) {
          const uint8_t lo = nvfp4_encode(r0[j], inv[j]);
          const uint8_t hi = nvfp4_encode(r1[j], inv[j]);
          vg[j * (d.k / 2) + k / 2] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
    }
  }
  return m;
}

Tensor dequantize_nvfp4(const Nvfp4Matrix& m, DType out, int64_t g0, int64_t g1) {
  AVDIT_REQUIRE(out == DType::F32 || out == DType::BF16, "NVFP4 dequantises to F32 or BF16, not {}",
                dtype_name(out));
  const int64_t groups = m.groups(), k = m.k(), n = m.n(), nb = k / kNvfp4Block;
  if (g1 < 0) g1 = groups;
  AVDIT_REQUIRE(0 <= g0 && g0 <= g1 && g1 <= groups, "NVFP4 dequantise: expert range [{}, {}) outside [0, {})",
                g0, g1, groups);
  AVDIT_CHECK(m.values.numel() == groups * n * (k / 2) && m.block_scales.numel() == groups * n * nb &&
                  m.global_scales.numel() == groups,
              "NVFP4 matrix {} has inconsistent parts", shape_str(m.shape));
  const Shape shape = (m.shape.size() == 2 && g0 == 0 && g1 == 1) ? m.shape : Shape{g1 - g0, k, n};
  Tensor y = Tensor::empty(shape, out);
  const Tensor& values_c = m.values;
  const Tensor& scales_c = m.block_scales;
  const Tensor& globals_c = m.global_scales;
  const uint8_t* values = values_c.data<uint8_t>();
  const uint8_t* scales = scales_c.data<uint8_t>();
  const float* globals = globals_c.f32();
  float* yf = out == DType::F32 ? y.f32() : nullptr;
  uint16_t* yb = out == DType::BF16 ? y.data<uint16_t>() : nullptr;

  // nvfp4_decode's operations with the two decodes looked up once (e2m1 table, one e4m3 per block).
  float e2m1[16];
  for (int c = 0; c < 16; ++c) e2m1[c] = e2m1_to_f32(static_cast<uint8_t>(c));
  for (int64_t g = g0; g < g1; ++g) {
    const float s = globals[g];
    const int64_t base = (g - g0) * k * n;
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t* vj = values + (g * n + j) * (k / 2);
      const uint8_t* sj = scales + (g * n + j) * nb;
      float bs = 0.f;
      for (int64_t kk = 0; kk < k; ++kk) {
        if (kk % kNvfp4Block == 0) bs = e4m3_to_f32(sj[kk / kNvfp4Block]);
        const uint8_t code = (vj[kk / 2] >> ((kk & 1) * 4)) & 0xF;
        const float v = (e2m1[code] * bs) / s;
        if (yf) yf[base + kk * n + j] = v;
        else yb[base + kk * n + j] = f32_to_bf16(v);
      }
    }
  }
  return y;
}

Tensor fake_quantize_nvfp4(const Tensor& w, int reduce_dim) {
  if (reduce_dim < 0) reduce_dim = w.ndim() - 2;
  const Dims d = check_input(w, reduce_dim);
  const int64_t nb = d.k / kNvfp4Block;
  Tensor y = Tensor::empty(w.shape(), DType::BF16);
  uint16_t* yb = y.data<uint16_t>();
  std::vector<float> buf, amax(static_cast<size_t>(d.n));
  std::vector<uint8_t> bs(static_cast<size_t>(d.n));
  std::vector<float> inv(static_cast<size_t>(d.n));
  for (int64_t g = 0; g < d.g; ++g) {
    const float* x = expert_f32(w, d, g, buf);
    const float s = nvfp4_global_scale(matrix_amax(x, d.k * d.n, w, g));
    uint16_t* yg = yb + g * d.k * d.n;
    for (int64_t b = 0; b < nb; ++b) {
      block_amax_row(x, d.n, b, amax);
      for (int64_t j = 0; j < d.n; ++j) {
        bs[j] = nvfp4_block_scale(amax[j], s);
        inv[j] = nvfp4_block_encode_scale(bs[j], s);
      }
      for (int64_t i = 0; i < kNvfp4Block; ++i) {
        const int64_t row = (b * kNvfp4Block + i) * d.n;
        for (int64_t j = 0; j < d.n; ++j)
          yg[row + j] = f32_to_bf16(nvfp4_decode(nvfp4_encode(x[row + j], inv[j]), bs[j], s));
      }
    }
  }
  return y;
}

}  // namespace avdit::quant
