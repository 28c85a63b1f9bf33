// NVFP4 experts on the GPU, fake quantisation against the packed path, bit for bit (issue 8):
// - the MoE stages (cuda::moe::routed_experts) over millions of outputs, with fake-quantised
// experts
//   (bf16 weights holding quantise -> dequantise, uploaded in the checkpoint's [in, out] layout)
//   against packed experts (U8 codes + E4M3 block scales + F32 global scale on the device, expanded
//   by dequantize_nvfp4_bf16 into the K-major bf16 layout the packed experts use), every kernel
//   path this GPU has, fp32 and bf16 outputs;
// - the whole magi2-tiny forward with a fake-quantised checkpoint against the same model loaded
// with
//   --nvfp4-experts (packed at load), both precisions.
// The CPU twin of this test is tests/unit/nvfp4_moe_test.cpp; the dequantiser's own bit-exactness
// against the CPU is tests/gpu/nvfp4_cuda_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <filesystem>

#include "backend/cuda/context.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/magi2/api.h"
#include "ops/cuda/moe/grouped.h"
#include "ops/cuda/moe/moe.h"
#include "ops/cuda/nvfp4_dequant.h"
#include "ops/rows.h"
#include "quant/nvfp4.h"
#include "testing/compare.h"
#include "testing/nvfp4_fake.h"

namespace avdit::cuda {
namespace {

using test_util::same_bits;
using test_util::write_fake_quantised;

// Gaussian weights [G, K, N] in bf16 (the checkpoint's dtype), a different spread per expert so the
// global scales differ.
Tensor gaussian_stack(std::mt19937& gen, int64_t G, int64_t K, int64_t N) {
  Tensor t = Tensor::empty({G, K, N}, DType::F32);
  for (int64_t g = 0; g < G; ++g) {
    std::normal_distribution<float> d(0.f, (0.5f + 0.05f * float(g % 17)) / std::sqrt(float(K)));
    for (int64_t i = 0; i < K * N; ++i) t.f32()[g * K * N + i] = d(gen);
  }
  return t.to(DType::BF16);
}

// The packed matrix on the device, expanded to bf16 K-major [G, N, K] by the GPU dequantiser.
Tensor packed_on_device(Device& dev, const Tensor& w) {
  const quant::Nvfp4Matrix m = quant::quantize_nvfp4(w, 1);
  Tensor out = cuda_empty(dev, {m.groups(), m.n(), m.k()}, DType::BF16);
  dequantize_nvfp4_bf16(dev, to_device(dev, m.values), to_device(dev, m.block_scales),
                        to_device(dev, m.global_scales), 0, m.groups(), out);
  return out;
}

TEST(Nvfp4MoeCuda, FakeQuantisedEqualsPackedBitForBit) {
  // 2 heads x 32 experts, top-4, D 64, De 128 (NVFP4 blocks of 16 along K = D and De); 16,384
  // tokens.
  const int64_t T = 16384, H = 2, E = 32, K = 4, D = 64, De = 128, G = H * E;
  std::mt19937 gen(8);
  const Tensor gate = gaussian_stack(gen, G, D, De), up = gaussian_stack(gen, G, D, De),
               down = gaussian_stack(gen, G, De, D);
  ops::CudaContext ctx;
  Device& dev = ctx.dev();
  moe::ExpertWeights fake{to_device(dev, quant::fake_quantize_nvfp4(gate)),
                          to_device(dev, quant::fake_quantize_nvfp4(up)),
                          to_device(dev, quant::fake_quantize_nvfp4(down)), false};
  moe::ExpertWeights packed{packed_on_device(dev, gate), packed_on_device(dev, up),
                            packed_on_device(dev, down), true};

  // Routing from the GPU router on random activations (sigmoid, bias, top-4, route_scale 2.5).
  moe::RouterConfig rc{H, E, K, D, false, true, 2.5f};
  Tensor x = Tensor::empty({T, H * D}, DType::F32), rg = Tensor::empty({G, D}, DType::F32),
         bias = Tensor::empty({G}, DType::F32);
  std::normal_distribution<float> n01(0.f, 1.f);
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = n01(gen);
  for (int64_t i = 0; i < rg.numel(); ++i) rg.f32()[i] = 0.1f * n01(gen);
  for (int64_t i = 0; i < bias.numel(); ++i) bias.f32()[i] = 0.01f * n01(gen);
  const Tensor x16 = to_device(dev, x.to(DType::BF16));
  const moe::Routing r = moe::route(dev, x16, to_device(dev, rg), to_device(dev, bias), rc);

  struct Case {
    moe::ExpertPath path;
    DType out;
    const char* name;
  };
  std::vector<Case> cases = {{moe::ExpertPath::Simt, DType::F32, "simt fp32"},
                             {moe::ExpertPath::Simt, DType::BF16, "simt bf16"},
                             {moe::ExpertPath::Auto, DType::BF16, "auto bf16"}};
  if (moe::grouped_supported(dev, DType::BF16, rc, De, DType::BF16))
    cases.push_back({moe::ExpertPath::Grouped, DType::BF16, "grouped bf16"});
  int64_t compared = 0;
  for (const Case& c : cases) {
    // The F32 path reads F32 weights, as the fp32 mode widens the dequantised bf16
    // (ops/cuda/moe.cpp).
    const auto widen = [&](const moe::ExpertWeights& w) {
      if (c.out != DType::F32) return w;
      return moe::ExpertWeights{ops::cast(ctx, w.gate, DType::F32),
                                ops::cast(ctx, w.up, DType::F32),
                                ops::cast(ctx, w.down, DType::F32), w.k_major};
    };
    const Tensor xin = c.out == DType::F32 ? ops::cast(ctx, x16, DType::F32) : x16;
    const Tensor a = to_host(dev, moe::routed_experts(dev, xin, r, widen(fake), rc, c.out, c.path));
    const Tensor b =
        to_host(dev, moe::routed_experts(dev, xin, r, widen(packed), rc, c.out, c.path));
    EXPECT_TRUE(same_bits(a, b)) << c.name << ": fake-quantised vs packed experts";
    compared += a.numel();
  }
  std::printf("fake == packed on the GPU over %lld MoE output values (%zu kernel paths x dtypes)\n",
              static_cast<long long>(compared), cases.size());
  EXPECT_GE(compared, 2'000'000);
}

// The grouped GEMMs' layout straight from the packed codes: gate and up dequantised into the even
// and odd rows of one [G, 2 De, D] tensor give the bits pack_grouped_weights makes from the
// fake-quantised [in, out] weights, and the plain layout's rows are the same values.
TEST(Nvfp4MoeCuda, InterleavedDequantisationEqualsPackedGroupedLayout) {
  const int64_t H = 3, E = 16, D = 64, De = 96, G = H * E;
  std::mt19937 gen(21);
  const Tensor gate = gaussian_stack(gen, G, D, De), up = gaussian_stack(gen, G, D, De);
  Device dev;
  const quant::Nvfp4Matrix qg = quant::quantize_nvfp4(gate, 1), qu = quant::quantize_nvfp4(up, 1);
  Tensor inter = cuda_empty(dev, {G, 2 * De, D}, DType::BF16);
  const quant::Nvfp4Matrix* q[2] = {&qg, &qu};
  for (int m = 0; m < 2; ++m)
    dequantize_nvfp4_bf16(dev, to_device(dev, q[m]->values), to_device(dev, q[m]->block_scales),
                          to_device(dev, q[m]->global_scales), 0, G, inter, 2, m);
  const moe::RouterConfig rc{H, E, 2, D, false, true, 1.f};
  const Tensor fake_down = quant::fake_quantize_nvfp4(gaussian_stack(gen, G, De, D));
  const moe::GroupedWeights want =
      moe::pack_grouped_weights(dev,
                                moe::ExpertWeights{to_device(dev, quant::fake_quantize_nvfp4(gate)),
                                                   to_device(dev, quant::fake_quantize_nvfp4(up)),
                                                   to_device(dev, fake_down), false},
                                rc);
  const Tensor got = to_host(dev, inter), ref = to_host(dev, want.gate_up);
  EXPECT_TRUE(same_bits(got, ref))
      << "interleaved dequantisation vs pack_grouped_weights of the fake-quantised weights";
  // Even rows of one expert = the plain layout's gate rows.
  Tensor plain = cuda_empty(dev, {G, De, D}, DType::BF16);
  dequantize_nvfp4_bf16(dev, to_device(dev, qg.values), to_device(dev, qg.block_scales),
                        to_device(dev, qg.global_scales), 0, G, plain);
  const Tensor p = to_host(dev, plain);
  const auto* pv = static_cast<const uint16_t*>(p.raw());
  const auto* gv = static_cast<const uint16_t*>(got.raw());
  int64_t diff = 0;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t j = 0; j < De; ++j)
      diff += std::memcmp(pv + (g * De + j) * D, gv + (g * 2 * De + 2 * j) * D, D * 2) != 0;
  EXPECT_EQ(diff, 0) << "rows of the interleaved layout that differ from the plain one";
  std::printf(
      "interleaved NVFP4 dequantisation: %lld values, equal to the packed grouped layout: %s\n",
      static_cast<long long>(got.numel()), same_bits(got, ref) ? "yes" : "NO");
  EXPECT_THROW(
      dequantize_nvfp4_bf16(dev, to_device(dev, qg.values), to_device(dev, qg.block_scales),
                            to_device(dev, qg.global_scales), 0, G, inter, 2, 2),
      BadInput);
}

TEST(Nvfp4MoeCuda, GoldenTinyFakeEqualsPackedModel) {
  const std::string dir = std::string(AVDIT_SHARED_DIR) + "/golden/magi2-tiny";
  const std::filesystem::path fake_dir = std::filesystem::temp_directory_path() /
                                         ("avdit_nvfp4_cuda_fake_" + std::to_string(::getpid()));
  std::filesystem::remove_all(fake_dir);
  write_fake_quantised(dir, fake_dir);
  const Checkpoint ckpt = Checkpoint::open(dir), fake_ckpt = Checkpoint::open(fake_dir);
  const models::magi2::Magi2Config c = models::magi2::config_from_checkpoint(ckpt);
  const models::magi2::PackedSequence seq =
      models::magi2::pack_inputs(c, read_all(dir + "/inputs.safetensors"));
  models::magi2::LoadOptions at_load;
  at_load.nvfp4_experts = true;
  ops::CudaContext ctx;
  for (DType act : {DType::F32, DType::BF16}) {
    const bool bf16 = act == DType::BF16;
    const models::magi2::Magi2Model mf(ctx, fake_ckpt, act), mp(ctx, ckpt, act, at_load);
    EXPECT_LT(mp.weight_bytes(), mf.weight_bytes());
    const Tensor a = models::magi2::forward_packed(mf, seq, false).at("model_output");
    const Tensor b = models::magi2::forward_packed(mp, seq, false).at("model_output");
    EXPECT_TRUE(same_bits(a, b)) << (bf16 ? "bf16" : "fp32")
                                 << " magi2-tiny: fake-quantised vs packed experts";
    std::printf("magi2-tiny %s: fake == packed over %lld outputs: %s\n", bf16 ? "bf16" : "fp32",
                static_cast<long long>(a.numel()), same_bits(a, b) ? "yes" : "NO");
  }
  std::filesystem::remove_all(fake_dir);
}

}  // namespace
}  // namespace avdit::cuda
