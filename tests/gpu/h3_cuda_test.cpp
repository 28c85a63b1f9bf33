// The H3 forward on the GPU against ../shared/golden/h3-tiny (T2VA and FL2VA), end to end:
//  - fp32 mode: every fixture tensor the CUDA model produces within the CPU path's parity bound
//    (1e-4 of max |reference|, tests/parity/h3_forward_test.cpp);
//  - bf16 mode: against the fp32 golden within the CPU bf16 mode's stated bound (3e-2 of max),
//    and against the CPU bf16 emulation (figures printed); the tensor-core flash attention against
//    the op set's attention on the same bf16 model;
//  - determinism: two runs give identical bytes;
//  - the flash kernel alone against the op set's attention on random bf16 q/k/v at several
//    lengths, with documents whose boundaries fall inside a 64-row tile.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/models/h3/gemm.h"
#include "backend/cuda/models/h3/kernels.h"
#include "backend/cuda/ops_cuda.h"
#include "io/safetensors.h"
#include "backend/cuda/models/h3/model_cuda.h"
#include "models/h3/api.h"
#include "models/h3/model.h"

namespace avdit::cuda::h3 {
namespace {

namespace mh = ::avdit::models::h3;

const std::filesystem::path kFixture = std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "h3-tiny";
constexpr double kTolerance = 1e-4;      // fp32: the CPU path's bound (of max |reference|)
constexpr double kBf16Tolerance = 3e-2;  // bf16: the CPU bf16 mode's stated bound vs the fp32 golden

struct Diff {
  double max_abs = 0, max_ref = 0;
  double rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
};

Diff compare(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(DType::F64), w = want.to(DType::F64);
  EXPECT_EQ(g.numel(), w.numel());
  Diff d;
  for (int64_t i = 0; i < std::min(g.numel(), w.numel()); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(g.data<double>()[i] - w.data<double>()[i]));
    d.max_ref = std::max(d.max_ref, std::fabs(w.data<double>()[i]));
  }
  return d;
}

const char* inputs_file(const std::string& c) {
  return c == "t2va" ? "inputs.safetensors" : "inputs_fl2va.safetensors";
}
const char* outputs_file(const std::string& c) {
  return c == "t2va" ? "outputs.safetensors" : "outputs_fl2va.safetensors";
}

class H3Cuda : public ::testing::TestWithParam<const char*> {
 protected:
  static Device& dev() {
    static Device d;
    return d;
  }
};

TEST_P(H3Cuda, Fp32MatchesGoldenEveryTensor) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const mh::H3Model cpu(ckpt);
  H3CudaModel gpu(dev(), cpu.config(), cpu.weights(), Precision::F32);
  const TensorMap inputs = read_all(kFixture / inputs_file(GetParam()));
  const TensorMap want = read_all(kFixture / outputs_file(GetParam()));
  const TensorMap got = mh::forward_from_inputs(gpu, inputs, /*dump=*/true);
  int compared = 0, missing = 0;
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, ref] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      std::printf("  (not dumped by the CUDA model: %s)\n", name.c_str());
      ++missing;
      continue;
    }
    ASSERT_EQ(it->second.numel(), ref.numel()) << name;
    const Diff d = compare(it->second, ref);
    std::printf("  %-26s max|diff| %.3e  max|ref| %.3e  rel %.3e\n", name.c_str(), d.max_abs, d.max_ref, d.rel());
    EXPECT_LE(d.rel(), kTolerance) << name;
    ++compared;
    if (d.rel() >= worst) {
      worst = d.rel();
      worst_name = name;
    }
  }
  std::printf("[%s gpu fp32] compared %d tensors (%d not dumped); worst %s at %.3g of max\n", GetParam(), compared,
              missing, worst_name.c_str(), worst);
  for (const char* name : {"video_out", "audio_out", "hidden_block2", "text_refined", "block0_q_rope"})
    EXPECT_TRUE(got.count(name)) << name;
}

TEST_P(H3Cuda, Bf16AgainstGoldenAndCpuBf16) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  mh::H3Model cpu(ckpt);
  cpu.set_bf16_activations(true);
  H3CudaModel gpu(dev(), cpu.config(), cpu.weights(), Precision::BF16);
  const TensorMap inputs = read_all(kFixture / inputs_file(GetParam()));
  const TensorMap want = read_all(kFixture / outputs_file(GetParam()));
  const TensorMap got = mh::forward_from_inputs(gpu, inputs, /*dump=*/true);
  const TensorMap cpu_bf16 = mh::forward_from_inputs(cpu, inputs, /*dump=*/true);
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, ref] : want) {
    auto it = got.find(name);
    if (it == got.end()) continue;
    const Diff d = compare(it->second, ref);
    EXPECT_LE(d.rel(), kBf16Tolerance) << name;
    if (d.rel() >= worst) {
      worst = d.rel();
      worst_name = name;
    }
  }
  std::printf("[%s gpu bf16] vs fp32 golden: worst %s at %.3g of max\n", GetParam(), worst_name.c_str(), worst);
  for (const char* name : {"video_out", "audio_out", "hidden_block2", "text_refined"}) {
    const Diff g = compare(got.at(name), want.at(name));
    const Diff c = compare(got.at(name), cpu_bf16.at(name));
    const Diff cg = compare(cpu_bf16.at(name), want.at(name));
    std::printf("  %-14s gpu-bf16 vs golden %.3e | gpu-bf16 vs cpu-bf16 %.3e | cpu-bf16 vs golden %.3e\n", name,
                g.rel(), c.rel(), cg.rel());
    EXPECT_LE(c.rel(), kBf16Tolerance) << name;
    EXPECT_GT(g.rel(), 1e-5) << name << ": the bf16 mode looks like fp32";
  }
  // The same bf16 model with the other attention cores instead of the flash kernel; cuDNN under
  // each document plan (the fixture packs {0, used, S}: a live document and a pad document, so
  // Split runs a dense graph and a ragged one, Ragged one graph sized by the live document).
  struct Core {
    AttentionImpl impl;
    AttentionLayout layout;
  };
  for (const Core& core : {Core{AttentionImpl::OpSet, AttentionLayout::Auto}, Core{AttentionImpl::Cudnn, AttentionLayout::Legacy},
                           Core{AttentionImpl::Cudnn, AttentionLayout::Ragged}, Core{AttentionImpl::Cudnn, AttentionLayout::Split}}) {
    gpu.set_attention(core.impl);
    gpu.set_attention_layout(core.layout);
    const TensorMap other = mh::forward_from_inputs(gpu, inputs, /*dump=*/false);
    ASSERT_EQ(gpu.attention_impl(), core.impl) << "cuDNN refused the fixture's shapes";
    for (const char* name : {"video_out", "audio_out"}) {
      const Diff d = compare(got.at(name), other.at(name));
      std::printf("  %-14s flash vs %s (%s) attention (bf16 model) %.3e of max\n", name, attention_name(core.impl),
                  attention_layout_name(core.layout), d.rel());
      EXPECT_LE(d.rel(), 2e-2) << name;
    }
  }
}

TEST_P(H3Cuda, DeterministicBytes) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const mh::H3Model cpu(ckpt);
  const TensorMap inputs = read_all(kFixture / inputs_file(GetParam()));
  for (Precision prec : {Precision::F32, Precision::BF16}) {
    H3CudaModel gpu(dev(), cpu.config(), cpu.weights(), prec);
    const TensorMap a = mh::forward_from_inputs(gpu, inputs, false);
    const TensorMap b = mh::forward_from_inputs(gpu, inputs, false);
    for (const char* name : {"video_out", "audio_out"}) {
      ASSERT_EQ(a.at(name).nbytes(), b.at(name).nbytes());
      std::printf("  %s %s: two runs %s\n", precision_name(prec), name,
                  std::memcmp(a.at(name).raw(), b.at(name).raw(), a.at(name).nbytes()) == 0 ? "identical" : "DIFFER");
      EXPECT_EQ(std::memcmp(a.at(name).raw(), b.at(name).raw(), a.at(name).nbytes()), 0)
          << precision_name(prec) << " " << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, H3Cuda, ::testing::Values("t2va", "fl2va"),
                         [](const auto& info) { return std::string(info.param); });

// The model keeps the layout-only part of prepare() (attention plan, RoPE tables, row indices) while
// the layout repeats: one model alternating between the two fixture layouts (t2va, then fl2va with
// its keyframe rows, then t2va again) must give, at every call, the bytes a fresh model gives.
TEST(H3CudaLayoutCache, AlternatingLayoutsMatchFreshModels) {
  Device dev;
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const mh::H3Model cpu(ckpt);
  for (Precision prec : {Precision::F32, Precision::BF16}) {
    H3CudaModel reused(dev, cpu.config(), cpu.weights(), prec);
    for (const char* c : {"t2va", "fl2va", "t2va", "fl2va"}) {
      const TensorMap inputs = read_all(kFixture / inputs_file(c));
      const TensorMap got = mh::forward_from_inputs(reused, inputs, false);
      H3CudaModel fresh(dev, cpu.config(), cpu.weights(), prec);
      const TensorMap want = mh::forward_from_inputs(fresh, inputs, false);
      for (const char* name : {"video_out", "audio_out"}) {
        ASSERT_EQ(got.at(name).nbytes(), want.at(name).nbytes()) << c << " " << name;
        EXPECT_EQ(std::memcmp(got.at(name).raw(), want.at(name).raw(), got.at(name).nbytes()), 0)
            << precision_name(prec) << " " << c << " " << name << ": the reused model differs from a fresh one";
      }
    }
  }
}

// The CUDA-graph replay of the host forward (bf16 mode, the default) against the same model run
// launch by launch: bit-equal at every call of a sampler-like sequence - new timesteps and latents
// each step, a repeated timestep set (the adaLN tables are not copied again), alternating layouts
// (captured again), and equal video and audio timesteps (one fewer table row: captured again). A
// stale buffer address in the graph (old tables, old latents, an old layout's positions) shows as a
// difference.
TEST(H3CudaGraph, ReplayMatchesLaunchByLaunch) {
  Device dev;
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const mh::H3Model cpu(ckpt);
  H3CudaModel graphed(dev, cpu.config(), cpu.weights(), Precision::BF16);
  H3CudaModel eager(dev, cpu.config(), cpu.weights(), Precision::BF16);
  eager.set_cuda_graphs(false);
  ASSERT_TRUE(graphed.cuda_graphs());
  struct Call {
    const char* layout;
    float t_video, t_audio, latent_scale;
  };
  const std::vector<Call> calls = {{"t2va", 900.f, 700.f, 1.0f}, {"t2va", 800.f, 600.f, 0.9f},
                                   {"t2va", 800.f, 600.f, 0.7f}, {"fl2va", 700.f, 500.f, 0.8f},
                                   {"t2va", 600.f, 400.f, 0.6f}, {"t2va", 500.f, 500.f, 0.5f},
                                   {"t2va", 400.f, 300.f, 1.1f}};
  for (const Call& call : calls) {
    TensorMap inputs = read_all(kFixture / inputs_file(call.layout));
    inputs["t_video"] = Tensor::from_floats({call.t_video}, {1});
    inputs["t_audio"] = Tensor::from_floats({call.t_audio}, {1});
    for (const char* name : {"video_latent", "audio_latent"}) {
      Tensor t = inputs.at(name).to_f32().clone();
      for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] *= call.latent_scale;
      inputs[name] = t;
    }
    const TensorMap got = mh::forward_from_inputs(graphed, inputs, false);
    const TensorMap want = mh::forward_from_inputs(eager, inputs, false);
    for (const char* name : {"video_out", "audio_out"}) {
      ASSERT_EQ(got.at(name).nbytes(), want.at(name).nbytes()) << call.layout << " " << name;
      EXPECT_EQ(std::memcmp(got.at(name).raw(), want.at(name).raw(), got.at(name).nbytes()), 0)
          << call.layout << " t " << call.t_video << "/" << call.t_audio << " " << name
          << ": the graph replay differs from the launch-by-launch forward";
    }
  }
  // Captures: t2va, fl2va, t2va again, then t2va with one fewer distinct timestep, then back.
  const H3CudaModel::GraphStats& s = graphed.graph_stats();
  std::printf("  graph: %ld captures, %ld replays, %zu nodes in the last graph\n", static_cast<long>(s.captures),
              static_cast<long>(s.replays), s.nodes);
  EXPECT_EQ(s.captures, 5);
  EXPECT_EQ(s.replays, static_cast<int64_t>(calls.size()));
  EXPECT_GT(s.nodes, size_t{10});
  EXPECT_EQ(eager.graph_stats().replays, 0);
}

// The flash kernel alone vs cuda::attention (fp32 math on the same bf16 inputs).
TEST(H3CudaFlash, MatchesOpSetAttention) {
  Device dev;
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  struct Case {
    int64_t S, heads;
    std::vector<int64_t> cu;
  };
  for (const Case& c : std::vector<Case>{{64, 1, {0, 64}},
                                         {300, 3, {0, 200, 300}},
                                         {1000, 2, {0, 937, 1000}},
                                         {517, 4, {0, 5, 130, 131, 517}},
                                         {2048, 2, {0, 2048, 2048}}}) {
    auto rnd = [&](float scale) {
      Tensor t = Tensor::empty({c.S, c.heads, 128}, DType::F32);
      for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = nd(gen) * scale;
      return to_device(dev, t.to(DType::BF16));
    };
    // q scaled up so that the softmax is peaked (a wrong key shows).
    const Tensor q = rnd(2.f), k = rnd(1.f), v = rnd(1.f);
    Tensor cu32 = Tensor::empty({static_cast<int64_t>(c.cu.size())}, DType::I32);
    for (size_t i = 0; i < c.cu.size(); ++i) cu32.data<int32_t>()[i] = static_cast<int32_t>(c.cu[i]);
    const Tensor cu = to_device(dev, cu32);
    const float scale = 1.0f / std::sqrt(128.0f);
    const Tensor ref = to_host(dev, attention(dev, q, k, v, scale, cu, nullptr, nullptr, DType::F32));
    Tensor out = cuda_empty(dev, {c.S, c.heads, 128}, DType::BF16);
    flash_attention_bf16(dev.stream(), q.raw(), k.raw(), v.raw(), device_ptr(out), cu.data<int32_t>(), cu.numel(),
                         c.S, c.heads, scale);
    const Tensor got = to_host(dev, out).to_f32();
    double num = 0, den = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const double d = static_cast<double>(got.f32()[i]) - ref.f32()[i];
      num += d * d;
      den += static_cast<double>(ref.f32()[i]) * ref.f32()[i];
    }
    const double nmse = num / den;
    std::printf("  flash S=%ld heads=%ld docs=%zu: NMSE %.3e\n", static_cast<long>(c.S), static_cast<long>(c.heads),
                c.cu.size() - 1, nmse);
    // bf16 output (NMSE <= ~1.5e-5) plus P rounded to bf16 before PV (~1e-5): 1e-4, far below the
    // ~1e-1 of a wrong mask, key or layout.
    EXPECT_LE(nmse, 1e-4) << c.S;
  }
}

// The fused element-wise kernels in bf16 at the real widths (16-byte vector paths: H = 5376,
// F = 14336) and at widths that take the scalar paths (H = 196, F = 100), against a float64 CPU
// computation of the same formula: x += gate * f; out = rms(x) * w * (1 + scale) + shift; and
// silu(g) * u. Bound: a few bf16 roundings (2^-8 each) of the largest output.
TEST(H3CudaKernels, ResidNormAndSwigluMatchFloat64) {
  Device dev;
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto host_bf16 = [&](int64_t n, float mean, float std) {
    Tensor t = Tensor::empty({n}, DType::F32);
    for (int64_t i = 0; i < n; ++i) t.f32()[i] = mean + std * nd(gen);
    return t.to(DType::BF16).to_f32();  // bf16-valued, kept as F32 on the host
  };
  for (int64_t H : {int64_t{5376}, int64_t{196}}) {
    const int64_t S = 7, M = 2;  // 7 rows, 2 table rows
    const Tensor x = host_bf16(S * H, 0.f, 1.f), f = host_bf16(S * H, 0.f, 1.f), w = host_bf16(H, 1.f, 0.1f);
    const Tensor tab = host_bf16(M * 3 * H, 0.f, 0.3f);  // [M, 3H]: gate | shift | scale
    std::vector<int32_t> rows_h = {0, 1, 1, 0, 1, 0, 0};
    const Tensor xd = to_device(dev, x.to(DType::BF16)), fd = to_device(dev, f.to(DType::BF16));
    const Tensor wd = to_device(dev, w.to(DType::BF16)), td = to_device(dev, tab.to(DType::BF16));
    const Tensor rows = to_device(dev, Tensor::from_data({S}, DType::I32, rows_h.data()));
    Tensor out = cuda_empty(dev, {S, H}, DType::BF16);
    ResidNormArgs a;
    a.x = device_ptr(xd);
    a.f = fd.raw();
    a.gate = TableSlice{td.raw(), 3 * H};
    a.row = std::as_const(rows).data<int32_t>();
    a.w = wd.raw();
    a.eps = 1e-5f;
    a.shift = TableSlice{static_cast<const char*>(td.raw()) + H * 2, 3 * H};
    a.scale = TableSlice{static_cast<const char*>(td.raw()) + 2 * H * 2, 3 * H};
    a.row2 = a.row;
    a.out = device_ptr(out);
    a.S = S;
    a.H = H;
    resid_norm_modulate(dev.stream(), true, a);
    const Tensor got_x = to_host(dev, xd).to_f32(), got = to_host(dev, out).to_f32();
    double worst_x = 0, worst = 0, max_out = 0;
    for (int64_t r = 0; r < S; ++r) {
      const float* T = tab.f32() + rows_h[r] * 3 * H;
      std::vector<double> xr(H);
      double ss = 0;
      for (int64_t c = 0; c < H; ++c) {
        xr[c] = x.f32()[r * H + c] + static_cast<double>(T[c]) * f.f32()[r * H + c];
        ss += xr[c] * xr[c];
        // Each rounding (of gate * f, then of the sum) errs by <= 2^-9 of its own magnitude.
        const double scale = std::fabs(x.f32()[r * H + c]) + std::fabs(static_cast<double>(T[c]) * f.f32()[r * H + c]);
        worst_x = std::max(worst_x, std::fabs(got_x.f32()[r * H + c] - xr[c]) / (scale + 1e-6));
      }
      const double inv = 1.0 / std::sqrt(ss / H + 1e-5);
      for (int64_t c = 0; c < H; ++c) {
        const double ref = xr[c] * inv * w.f32()[c] * (1.0 + T[2 * H + c]) + T[H + c];
        max_out = std::max(max_out, std::fabs(ref));
        worst = std::max(worst, std::fabs(got.f32()[r * H + c] - ref));
      }
    }
    std::printf("  resid+norm+modulate bf16 H=%ld: residual worst %.3e of |x| + |gate f|, out worst %.3e of max %.3f\n",
                static_cast<long>(H), worst_x, worst / max_out, max_out);
    EXPECT_LE(worst_x, 8e-3) << H;  // two bf16 roundings of <= 2^-9 each
    EXPECT_LE(worst / max_out, 2e-2) << H;
  }
  for (int64_t F : {int64_t{14336}, int64_t{100}}) {
    const int64_t S = 3;
    const Tensor u = host_bf16(S * 2 * F, 0.f, 2.f);
    const Tensor ud = to_device(dev, u.to(DType::BF16));
    Tensor out = cuda_empty(dev, {S, F}, DType::BF16);
    swiglu(dev.stream(), true, ud.raw(), device_ptr(out), S, F);
    const Tensor got = to_host(dev, out).to_f32();
    double worst = 0;
    for (int64_t r = 0; r < S; ++r)
      for (int64_t c = 0; c < F; ++c) {
        const double g = u.f32()[r * 2 * F + c], up = u.f32()[r * 2 * F + F + c];
        const double ref = g / (1.0 + std::exp(-g)) * up;
        worst = std::max(worst, std::fabs(got.f32()[r * F + c] - ref) / (std::fabs(ref) + 1e-2));
      }
    std::printf("  swiglu bf16 F=%ld: worst rel %.3e\n", static_cast<long>(F), worst);
    EXPECT_LE(worst, 1.6e-2) << F;
  }
}

// The host plan of the cuDNN calls: empty documents dropped, the ragged graph sized by the longest
// document it holds, Split's dense part = the first document.
TEST(H3CudaAttentionPlan, CoversEveryDocument) {
  Device dev;
  auto host = [&](const Tensor& t) {
    std::vector<int64_t> v;
    if (!t.defined()) return v;
    const Tensor h = to_host(dev, t);
    for (int64_t i = 0; i < h.numel(); ++i) v.push_back(h.data<int32_t>()[i]);
    return v;
  };
  const std::vector<int64_t> cu = {0, 960, 960, 1000, 1024};
  const AttentionPlan legacy = plan_attention(dev, cu, AttentionLayout::Legacy);
  EXPECT_EQ(legacy.dense_rows, 0);
  EXPECT_EQ(host(legacy.tail_cu), cu);
  EXPECT_EQ(legacy.tail_max, 1024);
  const AttentionPlan ragged = plan_attention(dev, cu, AttentionLayout::Ragged);
  EXPECT_EQ(ragged.dense_rows, 0);
  EXPECT_EQ(host(ragged.tail_cu), (std::vector<int64_t>{0, 960, 1000, 1024}));
  EXPECT_EQ(ragged.tail_max, 960);
  const AttentionPlan split = plan_attention(dev, cu, AttentionLayout::Split);
  EXPECT_EQ(split.dense_rows, 960);
  EXPECT_EQ(host(split.tail_cu), (std::vector<int64_t>{0, 40, 64}));
  EXPECT_EQ(split.tail_max, 40);
  EXPECT_EQ(host(split.cu), cu);
  const AttentionPlan one = plan_attention(dev, {0, 512, 512}, AttentionLayout::Split);
  EXPECT_EQ(one.dense_rows, 512);
  EXPECT_FALSE(one.tail_cu.defined());
  EXPECT_THROW(plan_attention(dev, {0, 10, 5}, AttentionLayout::Auto), BadInput);
}

// cuDNN's ragged graph sized by the longest segment (max_seqlen < S) and the dense graph on a row
// range give the op set's attention (fp32 math on the same bf16 inputs).
TEST(H3CudaAttentionPlan, CudnnMaxSeqlenAndDenseRowsMatchOpSet) {
  Device dev;
  std::mt19937 gen(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t S = 700, heads = 3;
  auto rnd = [&](float scale) {
    Tensor t = Tensor::empty({S, heads, 128}, DType::F32);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = nd(gen) * scale;
    return to_device(dev, t.to(DType::BF16));
  };
  const Tensor q = rnd(2.f), k = rnd(1.f), v = rnd(1.f);
  if (!cudnn_attention_available(dev, q, k, v)) GTEST_SKIP() << "no cuDNN in this build";
  const float scale = 1.0f / std::sqrt(128.0f);
  auto nmse = [&](const Tensor& got_d, const Tensor& ref_d) {
    const Tensor got = to_host(dev, got_d).to_f32(), ref = to_host(dev, ref_d).to_f32();
    double num = 0, den = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const double d = static_cast<double>(got.f32()[i]) - ref.f32()[i];
      num += d * d;
      den += static_cast<double>(ref.f32()[i]) * ref.f32()[i];
    }
    return num / den;
  };
  const std::vector<int64_t> docs = {0, 100, 100, 517, 700};
  for (AttentionLayout layout : {AttentionLayout::Legacy, AttentionLayout::Ragged, AttentionLayout::Split}) {
    const AttentionPlan p = plan_attention(dev, docs, layout);
    const Tensor ref = attention(dev, q, k, v, scale, p.cu, nullptr, nullptr, DType::F32);
    Tensor out = cuda_empty(dev, {S, heads, 128}, DType::BF16);
    if (p.dense_rows > 0) {
      SdpaOut into{out.slice_rows(0, p.dense_rows), {}};
      cudnn_sdpa(dev, q.slice_rows(0, p.dense_rows), k.slice_rows(0, p.dense_rows), v.slice_rows(0, p.dense_rows),
                 scale, {}, &into, nullptr, false);
    }
    if (p.tail_cu.defined()) {
      const int64_t r0 = p.dense_rows;
      SdpaOut into{out.slice_rows(r0, S), {}};
      cudnn_sdpa(dev, q.slice_rows(r0, S), k.slice_rows(r0, S), v.slice_rows(r0, S), scale, p.tail_cu, &into, nullptr,
                 false, p.tail_max);
    }
    const double e = nmse(out, ref);
    std::printf("  cuDNN %s plan (dense %ld rows, ragged max %ld): NMSE %.3e\n", attention_layout_name(layout),
                static_cast<long>(p.dense_rows), static_cast<long>(p.tail_max), e);
    EXPECT_LE(e, 1e-4) << attention_layout_name(layout);
  }
}

// Tuned cuBLASLt algorithm: the same product as the heuristic's (within bf16 output rounding of
// the fp64 reference), and the choice recorded.
TEST(H3CudaGemm, TunedMatchesReference) {
  Device dev;
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t M = 333, N = 384, K = 256;
  auto rnd = [&](int64_t r, int64_t c) {
    Tensor t = Tensor::empty({r, c}, DType::F32);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = nd(gen);
    return t.to(DType::BF16);
  };
  const Tensor xh = rnd(M, K), wh = rnd(N, K);
  const Tensor x = to_device(dev, xh), w = to_device(dev, wh);
  const Tensor xf = xh.to_f32(), wf = wh.to_f32();
  Gemm gemm(dev);
  Tensor y = cuda_empty(dev, {M, N}, DType::BF16);
  gemm.tune({x.raw(), M, K, DType::BF16}, {w.raw(), N, K, DType::BF16}, device_ptr(y), DType::BF16, 8);
  ASSERT_EQ(gemm.tune_log().size(), 1u);
  EXPECT_GE(gemm.tune_log()[0].tried, 1);
  gemm.run({x.raw(), M, K, DType::BF16}, {w.raw(), N, K, DType::BF16}, nullptr, device_ptr(y), DType::BF16);
  const Tensor got = to_host(dev, y).to_f32();
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0;
      for (int64_t kk = 0; kk < K; ++kk) ref += static_cast<double>(xf.f32()[i * K + kk]) * wf.f32()[j * K + kk];
      worst = std::max(worst, std::fabs(got.f32()[i * N + j] - ref) / (std::fabs(ref) + 1.0));
    }
  std::printf("  tuned GEMM [%ld, %ld] x [%ld, %ld]^T: candidate #%d of %d, worst |err| / (|ref| + 1) %.3e\n",
              static_cast<long>(M), static_cast<long>(K), static_cast<long>(N), static_cast<long>(K),
              gemm.tune_log()[0].chosen, gemm.tune_log()[0].tried, worst);
  EXPECT_LE(worst, 1e-2);  // bf16 output: 2^-8 relative
}

}  // namespace
}  // namespace avdit::cuda::h3
