// NVFP4 dequantisation on the GPU against the CPU reference (quant::dequantize_nvfp4), bit for bit:
// Gaussian expert stacks at the MAGI-2 expert widths (with outliers, all-zero blocks, an all-zero
// expert, blocks whose scale underflows, a matrix whose S clamps to FLT_MAX), odd column counts,
// expert sub-ranges, and every (code, block scale) pair from random packed bytes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "ops/cuda/nvfp4_dequant.h"
#include "quant/nvfp4.h"

namespace avdit::cuda {
namespace {

// CPU dequantise ([G', K, N]) transposed to the GPU's K-major [G', N, K].
Tensor cpu_reference_kmajor(const quant::Nvfp4Matrix& m, int64_t g0, int64_t g1) {
  const Tensor y = quant::dequantize_nvfp4(m, DType::BF16, g0, g1);
  const int64_t G = g1 - g0, K = m.k(), N = m.n();
  Tensor t = Tensor::empty({G, N, K}, DType::BF16);
  const uint16_t* src = y.data<uint16_t>();
  uint16_t* dst = t.data<uint16_t>();
  for (int64_t g = 0; g < G; ++g)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) dst[(g * N + n) * K + k] = src[(g * K + k) * N + n];
  return t;
}

// Runs the GPU dequantisation of [g0, g1) and returns the number of differing bf16 words.
int64_t gpu_mismatches(Device& dev, const quant::Nvfp4Matrix& m, int64_t g0, int64_t g1) {
  const Tensor packed = to_device(dev, m.values), scales = to_device(dev, m.block_scales),
               globals = to_device(dev, m.global_scales);
  Tensor out = cuda_empty(dev, {g1 - g0, m.n(), m.k()}, DType::BF16);
  dequantize_nvfp4_bf16(dev, packed, scales, globals, g0, g1, out);
  const Tensor got = to_host(dev, out);
  const Tensor want = cpu_reference_kmajor(m, g0, g1);
  const uint16_t* a = got.data<uint16_t>();
  const uint16_t* b = want.data<uint16_t>();
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (a[i] != b[i] && bad < 5)
      std::printf("  mismatch at %lld: gpu 0x%04x cpu 0x%04x\n", static_cast<long long>(i), a[i],
                  b[i]);
    bad += a[i] != b[i];
  }
  return bad;
}

Tensor gaussian_stack(Shape shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  Tensor w = Tensor::empty(shape, DType::F32);
  const int64_t G = shape[0], K = shape[1], N = shape[2], per = K * N;
  float* x = w.f32();
  for (int64_t i = 0; i < w.numel(); ++i) x[i] = d(gen);
  for (int64_t g = 0; g < G; ++g) {
    float* e = x + g * per;
    const float scale = g % 4 == 0 ? 0.02f : g % 4 == 1 ? 3e3f : g % 4 == 2 ? 1e-4f : 1.f;
    for (int64_t i = 0; i < per; ++i) e[i] *= scale;
    for (int64_t i = 0; i < per; i += 613) e[i] *= 80.f;  // outliers
    // An all-zero block and a block ~1e-8 of the amax (its e4m3 scale underflows to 0) per expert.
    const int64_t n0 = g % N, n1 = (g + 1) % N;
    for (int64_t k = 0; k < 16; ++k) e[k * N + n0] = 0.f;
    for (int64_t k = 16; k < 32 && k < K; ++k) e[k * N + n1] *= 1e-8f * scale;
  }
  if (G > 2)
    for (int64_t i = 0; i < per; ++i) x[2 * per + i] = 0.f;  // an all-zero expert: S = 1
  if (G > 5)
    for (int64_t i = 0; i < per; ++i)
      x[5 * per + i] *= 1e-38f;  // S clamps to FLT_MAX, subnormal outputs
  return w;
}

TEST(Nvfp4Cuda, DequantiseMatchesCpuBitForBit) {
  Device dev;
  struct Case {
    Shape shape;
    DType in;
  };
  // MAGI-2 expert matrices: W_gate / W_up [E, 256, 1280] and W_down [E, 1280, 256]; odd N; tiny.
  const Case cases[] = {{{8, 256, 1280}, DType::BF16},
                        {{8, 1280, 256}, DType::BF16},
                        {{7, 96, 33}, DType::F32},
                        {{6, 64, 96}, DType::BF16},
                        {{1, 16, 1}, DType::F32}};
  int64_t total = 0;
  uint32_t seed = 1;
  for (const Case& c : cases) {
    const Tensor w = gaussian_stack(c.shape, seed++).to(c.in);
    const quant::Nvfp4Matrix m = quant::quantize_nvfp4(w, 1);
    const int64_t G = c.shape[0];
    EXPECT_EQ(gpu_mismatches(dev, m, 0, G), 0) << shape_str(c.shape);
    total += w.numel();
    if (G > 3) {
      EXPECT_EQ(gpu_mismatches(dev, m, 1, G - 1), 0) << shape_str(c.shape) << " experts [1, G-1)";
      EXPECT_EQ(gpu_mismatches(dev, m, 3, 4), 0) << shape_str(c.shape) << " expert 3";
    }
    // Sanity: the fake-quantised stack equals the GPU output transposed (one more path, same bits).
    if (c.shape[1] == 96) {
      const Tensor fake = quant::fake_quantize_nvfp4(w);
      EXPECT_EQ(std::memcmp(fake.raw(), quant::dequantize_nvfp4(m, DType::BF16).raw(),
                            static_cast<size_t>(fake.nbytes())),
                0);
    }
  }
  std::printf("GPU NVFP4 dequantisation == CPU over %lld weights\n", static_cast<long long>(total));
  EXPECT_GT(total, 5'000'000);
}

TEST(Nvfp4Cuda, EveryCodeAndScaleMatchesCpu) {
  // Random bytes: every code pair, every non-NaN e4m3 scale (negative ones too), varied S.
  Device dev;
  const int64_t G = 6, N = 512, K = 256;
  std::mt19937 gen(7);
  quant::Nvfp4Matrix m;
  m.shape = {G, K, N};
  m.values = Tensor::empty({G, N, K / 2}, DType::U8);
  m.block_scales = Tensor::empty({G, N, K / 16}, DType::F8_E4M3);
  m.global_scales = Tensor::empty({G}, DType::F32);
  uint8_t* v = m.values.data<uint8_t>();
  for (int64_t i = 0; i < m.values.numel(); ++i) v[i] = static_cast<uint8_t>(gen());
  uint8_t* s = m.block_scales.data<uint8_t>();
  for (int64_t i = 0; i < m.block_scales.numel(); ++i) {
    uint8_t b = static_cast<uint8_t>(i % 254);  // 0..253 skipping the NaN codes 0x7F and 0xFF
    s[i] = b >= 0x7F ? static_cast<uint8_t>(b + 1) : b;
  }
  const float globals[G] = {1.f,     448.f, 2688.f / 0.0371f, 3.4028235e38f, 2688.f / 123.456f,
                            7.3e-36f};
  std::memcpy(m.global_scales.f32(), globals, sizeof(globals));
  EXPECT_EQ(gpu_mismatches(dev, m, 0, G), 0);
}

TEST(Nvfp4Cuda, BadOperandsAreBadInput) {
  Device dev;
  const quant::Nvfp4Matrix m = quant::quantize_nvfp4(gaussian_stack({3, 32, 8}, 9), 1);
  const Tensor packed = to_device(dev, m.values), scales = to_device(dev, m.block_scales),
               globals = to_device(dev, m.global_scales);
  Tensor out = cuda_empty(dev, {2, 8, 32}, DType::BF16);
  EXPECT_THROW(dequantize_nvfp4_bf16(dev, packed, scales, globals, 0, 3, out),
               BadInput);  // wrong out shape
  EXPECT_THROW(dequantize_nvfp4_bf16(dev, packed, scales, globals, 2, 4, out), BadInput);  // range
  EXPECT_THROW(dequantize_nvfp4_bf16(dev, m.values, scales, globals, 0, 2, out),
               BadInput);  // host tensor
  Tensor f32_out = cuda_empty(dev, {2, 8, 32}, DType::F32);
  EXPECT_THROW(dequantize_nvfp4_bf16(dev, packed, scales, globals, 0, 2, f32_out), BadInput);
  EXPECT_NO_THROW(dequantize_nvfp4_bf16(dev, packed, scales, globals, 1, 3, out));
}

}  // namespace
}  // namespace avdit::cuda
