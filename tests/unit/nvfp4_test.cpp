// NVFP4 expert weights: error on Gaussian weights, fake quantisation == pack -> dequantise bit for
// bit, the decode against float64, edge cases (zeros, saturation, bad shapes) and the packed layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "quant/nvfp4.h"

namespace avdit::quant {
namespace {

Tensor gaussian(Shape shape, uint64_t seed, float std = 1.f) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  fill_normal(t, seed, 0, 0.f, std);
  return t;
}

// The e4m3 value from its definition (bias 7, 3 mantissa bits, 0x7F / 0xFF NaN), in float64.
double e4m3_definition(uint8_t v) {
  const int e = (v >> 3) & 0xF, m = v & 7;
  const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (v & 0x80) ? -mag : mag;
}

const double kE2M1Values[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};

double relative_rms(const Tensor& x, const Tensor& y) {
  const Tensor xf = x.to_f32(), yf = y.to_f32();
  const float* a = static_cast<const Tensor&>(xf).f32();
  const float* b = static_cast<const Tensor&>(yf).f32();
  double num = 0, den = 0;
  for (int64_t i = 0; i < xf.numel(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(a[i]) * a[i];
  }
  return std::sqrt(num / den);
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

TEST(Nvfp4, RelativeRmsErrorOnGaussianWeights) {
  const Tensor w = gaussian({4, 1280, 256}, 11);  // 1.3M values, the MAGI-2 expert K
  const Nvfp4Matrix m = quantize_nvfp4(w, 1);
  const double f32_err = relative_rms(w, dequantize_nvfp4(m, DType::F32));
  const double bf16_err = relative_rms(w, fake_quantize_nvfp4(w));
  std::printf("NVFP4 relative RMS error on %lld Gaussian values: %.4f%% (f32 decode), %.4f%% (bf16)\n",
              static_cast<long long>(w.numel()), 100 * f32_err, 100 * bf16_err);
  EXPECT_NEAR(f32_err, 0.095, 0.003);
  EXPECT_NEAR(bf16_err, 0.095, 0.003);
}

TEST(Nvfp4, FakeQuantisationEqualsPackedPathBitForBit) {
  // Experts of very different scales (one global scale each) and a heavy tail, F32 and BF16 inputs.
  Tensor w = gaussian({6, 512, 384}, 12);  // 1.2M values
  float* x = w.f32();
  const int64_t per = 512 * 384;
  const float expert_scale[6] = {1.f, 1e-3f, 3e4f, 1e-20f, 7.f, 0.02f};
  for (int64_t i = 0; i < w.numel(); ++i) {
    x[i] *= expert_scale[i / per];
    if (i % 997 == 0) x[i] *= 50.f;  // outliers: blocks whose scale is far above the rest
  }
  for (DType dt : {DType::F32, DType::BF16}) {
    const Tensor in = w.to(dt);
    const Tensor fake = fake_quantize_nvfp4(in);
    const Nvfp4Matrix m = quantize_nvfp4(in, 1);
    EXPECT_TRUE(bit_identical(fake, dequantize_nvfp4(m, DType::BF16))) << dtype_name(dt);
    // An expert range dequantises to the same bits as the matching slice of the whole.
    EXPECT_TRUE(bit_identical(fake.slice_rows(2, 5).clone(), dequantize_nvfp4(m, DType::BF16, 2, 5)));
    // And the bf16 output is the bf16 rounding of the f32 decode.
    EXPECT_TRUE(bit_identical(fake, dequantize_nvfp4(m, DType::F32).to(DType::BF16)));
  }
}

TEST(Nvfp4, DecodeOfEveryCodeMatchesFloat64) {
  const float globals[] = {1.f, 448.f, 2688.f / 0.0371f, 2688.f / 123.456f, 2688.f / 3e-30f, 0.75f};
  int checked = 0;
  for (float s : globals) {
    for (int bs = 0; bs < 0x7F; ++bs) {  // every finite non-negative e4m3 block scale
      for (int q = 0; q < 16; ++q) {
        const double want = kE2M1Values[q] * e4m3_definition(static_cast<uint8_t>(bs)) / double(s);
        const float got = nvfp4_decode(static_cast<uint8_t>(q), static_cast<uint8_t>(bs), s);
        ASSERT_EQ(got, static_cast<float>(want)) << "code " << q << " scale " << bs << " S " << s;
        ASSERT_EQ(std::signbit(got), std::signbit(want)) << "code " << q << " scale " << bs;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 6 * 127 * 16);
}

TEST(Nvfp4, AllZeroMatrix) {
  const Tensor w = Tensor::zeros({2, 32, 5}, DType::BF16);
  const Nvfp4Matrix m = quantize_nvfp4(w, 1);
  for (int g = 0; g < 2; ++g) EXPECT_EQ(m.global_scales.f32()[g], 1.f);
  const uint8_t* v = m.values.data<uint8_t>();
  for (int64_t i = 0; i < m.values.numel(); ++i) ASSERT_EQ(v[i], 0);
  const uint8_t* s = m.block_scales.data<uint8_t>();
  for (int64_t i = 0; i < m.block_scales.numel(); ++i) ASSERT_EQ(s[i], 0);
  EXPECT_TRUE(bit_identical(dequantize_nvfp4(m, DType::BF16), w));
}

TEST(Nvfp4, ZeroBlockInsideNonZeroMatrix) {
  Tensor w = gaussian({1, 64, 3}, 13);
  for (int k = 16; k < 32; ++k) w.f32()[k * 3 + 1] = 0.f;  // block 1 of column 1
  const Nvfp4Matrix m = quantize_nvfp4(w, 1);
  EXPECT_EQ(m.block_scales.data<uint8_t>()[1 * 4 + 1], 0);
  for (int j = 8; j < 16; ++j) EXPECT_EQ(m.values.data<uint8_t>()[1 * 32 + j], 0);
  const Tensor y = dequantize_nvfp4(m, DType::F32);
  for (int k = 16; k < 32; ++k) EXPECT_EQ(y.f32()[k * 3 + 1], 0.f);
  EXPECT_TRUE(bit_identical(fake_quantize_nvfp4(w), dequantize_nvfp4(m, DType::BF16)));
}

TEST(Nvfp4, HugeValuesSaturateWithoutNaN) {
  // Values up to the bf16 maximum, and blocks whose scale rounds above 448 or whose values round
  // above 6 after the block scale rounded down: everything saturates, nothing becomes NaN or inf.
  Tensor w = gaussian({2, 64, 17}, 14, 1e37f);
  const float big = bf16_to_f32(0x7F7F);  // the largest finite bf16
  w.f32()[0] = big;
  w.f32()[5] = -big;
  w.f32()[64 * 17 + 3] = 3e38f;
  for (DType dt : {DType::F32, DType::BF16}) {
    const Tensor in = w.to(dt);
    const Nvfp4Matrix m = quantize_nvfp4(in, 1);
    for (DType out : {DType::F32, DType::BF16}) {
      const Tensor y = dequantize_nvfp4(m, out).to_f32();
      for (int64_t i = 0; i < y.numel(); ++i) ASSERT_TRUE(std::isfinite(y.f32()[i])) << i;
    }
    EXPECT_TRUE(bit_identical(fake_quantize_nvfp4(in), dequantize_nvfp4(m, DType::BF16)));
    const uint8_t* s = m.block_scales.data<uint8_t>();
    for (int64_t i = 0; i < m.block_scales.numel(); ++i) ASSERT_LE(s[i], 0x7E);  // <= 448, never NaN
  }
  // The largest element maps to a block scale of 448 and code 6 and decodes back to itself.
  const Tensor y = dequantize_nvfp4(quantize_nvfp4(w, 1), DType::F32);
  EXPECT_NEAR(y.f32()[0] / big, 1.0, 1e-6);
}

TEST(Nvfp4, BadShapesAndValuesAreBadInput) {
  EXPECT_THROW(quantize_nvfp4(gaussian({2, 40, 16}, 1), 1), BadInput);  // K = 40, not a multiple of 16
  EXPECT_THROW(quantize_nvfp4(gaussian({2, 15, 16}, 1), 1), BadInput);  // odd K
  EXPECT_THROW(fake_quantize_nvfp4(gaussian({2, 15, 16}, 1)), BadInput);
  EXPECT_THROW(quantize_nvfp4(gaussian({2, 32, 16}, 1), 2), BadInput);  // blocks along N: not supported
  EXPECT_THROW(quantize_nvfp4(gaussian({32}, 1), 0), BadInput);
  EXPECT_THROW(quantize_nvfp4(Tensor::zeros({32, 4}, DType::F16), 0), BadInput);
  Tensor nan = gaussian({32, 4}, 1);
  nan.f32()[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(quantize_nvfp4(nan, 0), BadInput);
  nan.f32()[7] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(quantize_nvfp4(nan, 0), BadInput);
  Tensor nan3 = gaussian({9, 32, 4}, 1);  // experts run on several threads: the error still reaches the caller
  nan3.f32()[7 * 128 + 5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(quantize_nvfp4(nan3, 1), BadInput);
  const Nvfp4Matrix m = quantize_nvfp4(gaussian({3, 32, 4}, 1), 1);
  EXPECT_THROW(dequantize_nvfp4(m, DType::BF16, 2, 4), BadInput);
  EXPECT_THROW(dequantize_nvfp4(m, DType::F16), BadInput);
}

// TransformerEngine's order of operations, written out as its PyTorch emulation does
// (custom_recipes/reference_nvfp4.py, all float32): the library must match it code for code.
struct TeBlock {
  uint8_t bs;
  float inv;
};
TeBlock te_block(float block_amax, float amax) {
  const float flt_max = std::numeric_limits<float>::max();
  float s = std::fmin(float(448.0f * 6.0f) / amax, flt_max);
  if (s == 0.f || amax == 0.f) s = 1.f;
  const float s_dec = 1.0f / s;
  const float mult = s * (1.0f / 6.0f);
  const float decode = std::fmin(block_amax * mult, flt_max);
  const uint8_t bs = f32_to_e4m3(std::fmin(decode, 448.f), true);
  return {bs, std::fmin(1.0f / (e4m3_to_f32(bs) * s_dec), flt_max)};
}

TEST(Nvfp4, TransformerEngineOperationOrder) {
  // Random (matrix amax, block amax) pairs over many binades: block scale and encode scale match
  // TE's sequence exactly. The older order ((amax_b / 6) * S, then S / bs) differs on some pairs,
  // which shows the comparison can tell the two apart.
  uint64_t differ_bs = 0, differ_inv = 0, n = 0;
  for (uint64_t i = 0; i < 400000; ++i) {
    const float amax = std::ldexp(1.f + rng_uniform(71, 1, i), static_cast<int>(rng_uniform(71, 2, i) * 80) - 40);
    const float bam = amax * rng_uniform(71, 3, i);
    const TeBlock te = te_block(bam, amax);
    const float s = nvfp4_global_scale(amax);
    const uint8_t bs = nvfp4_block_scale(bam, s);
    ASSERT_EQ(bs, te.bs) << "amax " << amax << " block amax " << bam;
    const float inv = nvfp4_block_encode_scale(bs, s);
    ASSERT_EQ(inv, te.inv) << "amax " << amax << " block amax " << bam;
    const float x = bam * (2.f * rng_uniform(71, 4, i) - 1.f);
    ASSERT_EQ(nvfp4_encode(x, inv), f32_to_e2m1(x * te.inv));
    differ_bs += f32_to_e4m3((bam / 6.f) * s, true) != bs;
    const float old_inv = e4m3_to_f32(bs) == 0.f ? 0.f : s / e4m3_to_f32(bs);
    differ_inv += old_inv != inv;
    ++n;
  }
  std::printf("TE order vs the older order: %llu of %llu block scales and %llu encode scales differ\n",
              static_cast<unsigned long long>(differ_bs), static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(differ_inv));
  EXPECT_GT(differ_bs + differ_inv, 0u);
}

TEST(Nvfp4, FastE2m1RoundingEqualsGenericConversion) {
  // Every e2m1 value and midpoint, the floats either side of each, both signs, zeros, infinities,
  // huge and subnormal values, and 2M random floats over [-8, 8] and over many binades.
  std::vector<float> xs = {0.f, -0.f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(), 1e-30f};
  const float points[] = {0.f, 0.25f, 0.5f, 0.75f, 1.f, 1.25f, 1.5f, 1.75f, 2.f, 2.5f, 3.f, 3.5f, 4.f, 5.f, 6.f, 7.f, 8.f};
  for (float p : points)
    for (float v : {p, std::nextafter(p, 0.f), std::nextafter(p, 100.f)}) xs.insert(xs.end(), {v, -v});
  for (uint64_t i = 0; i < 1'000'000; ++i) {
    xs.push_back(16.f * rng_uniform(72, 1, i) - 8.f);
    xs.push_back(std::ldexp(rng_uniform(72, 2, i), static_cast<int>(rng_uniform(72, 3, i) * 260) - 130) *
                 (i % 2 ? -1.f : 1.f));
  }
  for (float x : xs) ASSERT_EQ(nvfp4_e2m1_rn(x), f32_to_e2m1(x)) << x;
}

TEST(Nvfp4, GlobalScaleEdgeCasesAsTransformerEngine) {
  EXPECT_EQ(nvfp4_global_scale(0.f), 1.f);
  EXPECT_EQ(nvfp4_global_scale(6.f), 448.f);
  // An amax so small that 2688 / amax overflows: TE clamps S to FLT_MAX (not 1).
  EXPECT_EQ(nvfp4_global_scale(1e-37f), std::numeric_limits<float>::max());
  // Such a matrix still round-trips sensibly: its largest element decodes close to itself.
  Tensor w = gaussian({1, 32, 4}, 16, 1e-38f);
  w.f32()[5] = 2e-38f;
  const Tensor y = dequantize_nvfp4(quantize_nvfp4(w, 1), DType::F32);
  EXPECT_TRUE(bit_identical(fake_quantize_nvfp4(w), dequantize_nvfp4(quantize_nvfp4(w, 1), DType::BF16)));
  EXPECT_NEAR(y.f32()[5] / 2e-38f, 1.0, 0.05);
}

TEST(Nvfp4, UnderflowingBlockScaleEncodesSixAndDecodesToZero) {
  // Column 0's second block is ~1e-7 of the matrix amax: its block scale underflows to e4m3 0, the
  // encode scale is FLT_MAX, so (as in TE) its non-zero values get code +-6 and decode to +-0.
  Tensor w = gaussian({1, 32, 2}, 17);
  for (int k = 16; k < 32; ++k) w.f32()[k * 2] = (k % 2 ? -1e-7f : 1e-7f) * (1 + k);
  w.f32()[20 * 2] = 0.f;
  const Nvfp4Matrix m = quantize_nvfp4(w, 1);
  ASSERT_EQ(m.block_scales.data<uint8_t>()[1], 0);
  const uint8_t* v = m.values.data<uint8_t>();  // column 0: bytes 8..15 hold k = 16..31
  for (int k = 16; k < 32; ++k) {
    const int code = (v[k / 2] >> (4 * (k % 2))) & 0xF;
    EXPECT_EQ(code, k == 20 ? 0 : (k % 2 ? 0xF : 0x7)) << k;
  }
  const Tensor y = dequantize_nvfp4(m, DType::F32);
  for (int k = 16; k < 32; ++k) {
    EXPECT_EQ(y.f32()[k * 2], 0.f) << k;
    EXPECT_EQ(std::signbit(y.f32()[k * 2]), k % 2 == 1 && k != 20) << k;
  }
  EXPECT_TRUE(bit_identical(fake_quantize_nvfp4(w), dequantize_nvfp4(m, DType::BF16)));
}

TEST(Nvfp4, PackedLayoutOfAHandMadeBlock) {
  // K = 16, N = 1: x is every e2m1 value in code order, so amax = 6, S = 2688 / 6 = 448, the block
  // scale is e4m3(6 / 6 * 448) = 448 (code 0x7E), the encode scale is 448 / 448 = 1 and code(k) = k.
  std::vector<float> x(16);
  for (int k = 0; k < 16; ++k) x[k] = static_cast<float>(kE2M1Values[k]);
  const Tensor w = Tensor::from_floats(x, {16, 1});
  const Nvfp4Matrix m = quantize_nvfp4(w, 0);
  EXPECT_EQ(m.values.shape(), (Shape{1, 1, 8}));
  EXPECT_EQ(m.block_scales.shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(m.global_scales.f32()[0], 448.f);
  EXPECT_EQ(m.block_scales.data<uint8_t>()[0], 0x7E);
  const uint8_t want[8] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE};  // low nibble = even k
  for (int j = 0; j < 8; ++j) EXPECT_EQ(m.values.data<uint8_t>()[j], want[j]) << j;
  const Tensor y = dequantize_nvfp4(m, DType::F32);
  EXPECT_EQ(y.shape(), (Shape{16, 1}));
  for (int k = 0; k < 16; ++k) EXPECT_EQ(y.f32()[k], x[k]) << k;
}

TEST(Nvfp4, PackedLayoutMatchesScalarRecipe) {
  // [G, K, N] = [2, 48, 3]: every code and block scale where the documented layout puts it.
  const Tensor w = gaussian({2, 48, 3}, 15);
  const Nvfp4Matrix m = quantize_nvfp4(w, 1);
  const float* x = w.f32();
  for (int g = 0; g < 2; ++g) {
    float amax = 0;
    for (int i = 0; i < 48 * 3; ++i) amax = std::max(amax, std::fabs(x[g * 144 + i]));
    const float s = nvfp4_global_scale(amax);
    ASSERT_EQ(m.global_scales.f32()[g], s);
    for (int n = 0; n < 3; ++n) {
      for (int b = 0; b < 3; ++b) {
        float bam = 0;
        for (int i = 0; i < 16; ++i) bam = std::max(bam, std::fabs(x[g * 144 + (b * 16 + i) * 3 + n]));
        const uint8_t bs = nvfp4_block_scale(bam, s);
        ASSERT_EQ(m.block_scales.data<uint8_t>()[(g * 3 + n) * 3 + b], bs);
        const float inv = nvfp4_block_encode_scale(bs, s);
        for (int i = 0; i < 16; ++i) {
          const int k = b * 16 + i;
          const uint8_t byte = m.values.data<uint8_t>()[(g * 3 + n) * 24 + k / 2];
          ASSERT_EQ((byte >> (4 * (k % 2))) & 0xF, nvfp4_encode(x[g * 144 + k * 3 + n], inv));
        }
      }
    }
  }
}

}  // namespace
}  // namespace avdit::quant
