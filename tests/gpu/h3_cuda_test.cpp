// The H3 forward on the GPU against ../shared/golden/h3-tiny (T2VA and FL2VA), end to end, through
// the one H3Model on a CUDA context:
//  - fp32: every fixture tensor within the CPU path's parity bound (1e-4 of max |reference|);
//  - bf16: against the fp32 golden within the CPU bf16 mode's stated bound (3e-2 of max), and
//  against
//    the CPU bf16 run (the same model on the CPU context);
//  - determinism: two runs give identical bytes; a stepper reused across alternating layouts gives
//  a
//    fresh stepper's bytes; timed GEMM and segment choices stay within the bf16 bound of the
//    defaults;
//  - FP8 attention: the GPU against the CPU's emulation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "backend/cuda/context.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "models/h3/packing.h"
#include "ops/random.h"
#include "ops/rows.h"

namespace avdit::models::h3 {
namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "h3-tiny";
constexpr double kTolerance = 1e-4;  // fp32: the CPU path's bound (of max |reference|)
constexpr double kBf16Tolerance =
    3e-2;  // bf16: the CPU bf16 mode's stated bound vs the fp32 golden

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

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

const char* inputs_file(const std::string& c) {
  return c == "t2va" ? "inputs.safetensors" : "inputs_fl2va.safetensors";
}
const char* outputs_file(const std::string& c) {
  return c == "t2va" ? "outputs.safetensors" : "outputs_fl2va.safetensors";
}

ops::CudaContext& gpu() {
  static ops::CudaContext c;
  return c;
}

class H3Cuda : public ::testing::TestWithParam<const char*> {};

TEST_P(H3Cuda, Fp32MatchesGoldenEveryTensor) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const H3Model model(gpu(), ckpt, DType::F32);
  const TensorMap inputs = read_all(kFixture / inputs_file(GetParam()));
  const TensorMap want = read_all(kFixture / outputs_file(GetParam()));
  const TensorMap got = forward_from_inputs(model, inputs, /*dump=*/true);
  int compared = 0;
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, ref] : want) {
    auto it = got.find(name);
    EXPECT_NE(it, got.end()) << "the GPU run did not produce " << name;
    if (it == got.end()) continue;
    ASSERT_EQ(it->second.numel(), ref.numel()) << name;
    const Diff d = compare(it->second, ref);
    std::printf("  %-26s max|diff| %.3e  max|ref| %.3e  rel %.3e\n", name.c_str(), d.max_abs,
                d.max_ref, d.rel());
    EXPECT_LE(d.rel(), kTolerance) << name;
    ++compared;
    if (d.rel() >= worst) worst = d.rel(), worst_name = name;
  }
  std::printf("[%s gpu fp32] compared %d tensors; worst %s at %.3g of max\n", GetParam(), compared,
              worst_name.c_str(), worst);
  EXPECT_EQ(compared, static_cast<int>(want.size()));
}

TEST_P(H3Cuda, Bf16AgainstGoldenAndCpuBf16) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  ops::CpuContext cpu_ctx;
  const H3Model cpu(cpu_ctx, ckpt, DType::BF16);
  const H3Model model(gpu(), ckpt, DType::BF16);
  const TensorMap inputs = read_all(kFixture / inputs_file(GetParam()));
  const TensorMap want = read_all(kFixture / outputs_file(GetParam()));
  const TensorMap got = forward_from_inputs(model, inputs, /*dump=*/true);
  const TensorMap cpu_bf16 = forward_from_inputs(cpu, inputs, /*dump=*/true);
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, ref] : want) {
    const Diff d = compare(got.at(name), ref);
    EXPECT_LE(d.rel(), kBf16Tolerance) << name;
    if (d.rel() >= worst) worst = d.rel(), worst_name = name;
  }
  std::printf("[%s gpu bf16] vs fp32 golden: worst %s at %.3g of max\n", GetParam(),
              worst_name.c_str(), worst);
  for (const char* name : {"video_out", "audio_out", "hidden_block2", "text_refined"}) {
    const Diff g = compare(got.at(name), want.at(name));
    const Diff c = compare(got.at(name), cpu_bf16.at(name));
    const Diff cg = compare(cpu_bf16.at(name), want.at(name));
    std::printf(
        "  %-14s gpu-bf16 vs golden %.3e | gpu-bf16 vs cpu-bf16 %.3e | cpu-bf16 vs golden %.3e\n",
        name, g.rel(), c.rel(), cg.rel());
    EXPECT_LE(c.rel(), kBf16Tolerance) << name;
    EXPECT_GT(g.rel(), 1e-5) << name << ": the bf16 mode looks like fp32";
  }
}

// --fp8-attention (ops/attention_fp8.h) through the one H3Model on the tiny fixture (head dim 128:
// the Hopper kernel on sm_90): the GPU's FP8 and the CPU's emulation agree within the bf16 mode's
// bound, and FP8 ran (the bf16 run's bytes differ). The op itself: tests/gpu/attention_fp8_test.cpp.
TEST_P(H3Cuda, Fp8AttentionAgainstCpuEmulation) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  ops::CpuContext cpu_ctx;
  H3Model cpu(cpu_ctx, ckpt, DType::BF16), model(gpu(), ckpt, DType::BF16);
  const H3Model plain(gpu(), ckpt, DType::BF16);
  cpu.set_fp8_attention(true);
  model.set_fp8_attention(true);
  const TensorMap inputs = read_all(kFixture / inputs_file(GetParam()));
  const TensorMap got = forward_from_inputs(model, inputs, false);
  const TensorMap emu = forward_from_inputs(cpu, inputs, false);
  const TensorMap bf16 = forward_from_inputs(plain, inputs, false);
  for (const char* name : {"video_out", "audio_out"}) {
    const Diff c = compare(got.at(name), emu.at(name)), b = compare(got.at(name), bf16.at(name));
    std::printf("  %-10s gpu-fp8 vs cpu-fp8 %.3e | gpu-fp8 vs gpu-bf16 %.3e\n", name, c.rel(),
                b.rel());
    EXPECT_LE(c.rel(), kBf16Tolerance) << name;
    EXPECT_GT(b.rel(), 0.0) << name << ": FP8 attention gave the bf16 run's bytes";
  }
}

TEST_P(H3Cuda, DeterministicBytes) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const TensorMap inputs = read_all(kFixture / inputs_file(GetParam()));
  for (DType act : {DType::F32, DType::BF16}) {
    const H3Model model(gpu(), ckpt, act);
    const TensorMap a = forward_from_inputs(model, inputs, false);
    const TensorMap b = forward_from_inputs(model, inputs, false);
    for (const char* name : {"video_out", "audio_out"})
      EXPECT_TRUE(same_bytes(a.at(name), b.at(name))) << dtype_name(act) << " " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, H3Cuda, ::testing::Values("t2va", "fl2va"),
                         [](const auto& info) { return std::string(info.param); });

// The stepper keeps one layout's plan and two timestep sets' adaLN tables: a stepper alternating
// between the two fixture layouts (t2va, then fl2va with its keyframe rows) and timesteps gives, at
// every call, the bytes of a fresh stepper.
TEST(H3CudaStepper, AlternatingLayoutsMatchFreshSteppers) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  for (DType act : {DType::F32, DType::BF16}) {
    const H3Model model(gpu(), ckpt, act);
    H3Stepper reused(model);
    int call = 0;
    for (const char* c : {"t2va", "fl2va", "t2va", "fl2va"}) {
      const TensorMap in = read_all(kFixture / inputs_file(c));
      VelocityRequest r;
      r.video_latent = in.at("video_latent").to_f32();
      r.audio_latent = in.at("audio_latent").to_f32();
      r.sigma_video = 0.9f - 0.1f * call;
      r.sigma_audio = 0.8f;
      r.text_refined = model.refine_text(in.at("text_embeds"));
      if (in.count("cond_latent")) {
        r.cond_latent = in.at("cond_latent").to_f32();
        const Tensor k = in.at("keyframe_frame_indices").to(DType::I64);
        r.keyframe_frame_indices.assign(k.data<int64_t>(), k.data<int64_t>() + k.numel());
      }
      const Velocity got = reused.velocity(r);
      H3Stepper fresh(model);
      const Velocity want = fresh.velocity(r);
      EXPECT_TRUE(same_bytes(gpu().download(got.video), gpu().download(want.video)))
          << c << " video";
      EXPECT_TRUE(same_bytes(gpu().download(got.audio), gpu().download(want.audio)))
          << c << " audio";
      ++call;
    }
  }
}

// A probe that counts the points of one name it is shown.
class CountingProbe final : public Probe {
 public:
  explicit CountingProbe(const char* name) : name_(name) {}
  bool wants(const Point& p) const override { return p.is(name_); }
  void on(ops::Context&, const Point&, Tensor&) override { ++seen; }
  int seen = 0;

 private:
  const char* name_;
};

// The stepper's CUDA graph: a probe on a point outside the forward (the sampler's) leaves it
// replayed; one on a point inside makes every call eager, so the probe sees every call; either
// way the bytes are those of a context that never captures.
TEST(H3CudaStepper, GraphsReplayUnlessAProbeLooksInside) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const TensorMap in = read_all(kFixture / inputs_file("t2va"));
  ops::CudaContext graphs, eager;
  eager.set_graphs(false);
  const H3Model model(graphs, ckpt, DType::BF16);
  const H3Model eager_model(eager, ckpt, DType::BF16);
  VelocityRequest r;
  r.video_latent = in.at("video_latent").to_f32();
  r.audio_latent = in.at("audio_latent").to_f32();
  r.sigma_video = 0.7f;
  r.sigma_audio = 0.6f;
  H3Stepper want_stepper(eager_model);
  r.text_refined = eager_model.refine_text(in.at("text_embeds"));
  const Velocity want = want_stepper.velocity(r);
  r.text_refined = model.refine_text(in.at("text_embeds"));
  H3Stepper stepper(model);
  auto same = [&](const Velocity& got) {
    return same_bytes(graphs.download(got.video), eager.download(want.video)) &&
           same_bytes(graphs.download(got.audio), eager.download(want.audio));
  };
  {
    CountingProbe outside("sample.step.output");
    ProbeScope scope(graphs.observer(), &outside);
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(same(stepper.velocity(r))) << "call " << i;
    EXPECT_EQ(outside.seen, 0);
  }
  const int64_t replays = graphs.graph_stats().replays;
  EXPECT_GE(replays, 2) << "calls 3 and 4 replay the graph captured by call 2";
  {
    CountingProbe inside("block{}_attn_out");
    ProbeScope scope(graphs.observer(), &inside);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(same(stepper.velocity(r))) << "probed call " << i;
    EXPECT_EQ(inside.seen, 3 * model.config().num_layers);
    EXPECT_EQ(graphs.graph_stats().replays, replays) << "a probed body must not be replayed";
  }
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same(stepper.velocity(r))) << "unprobed call " << i;
  EXPECT_GE(graphs.graph_stats().replays, replays + 2);
}

// Timed choices (GEMM algorithms, attention segment plans: what `avdit bench h3` opts into) change
// the summation order only: within the bf16 bound of the default run on a model large enough to be
// timed (the thresholds are 4,096 rows).
TEST(H3CudaTimedChoices, WithinBoundOfDefaults) {
  H3Config c;
  c.hidden_size = 256;
  c.num_layers = 2;
  c.token_refiner_num_layers = 1;
  c.num_attention_heads = 2;
  c.attention_head_dim = 128;
  c.ffn_hidden_size = 512;
  c.text_dim = 64;
  c.time_embed_hidden_size = 256;
  c.time_embed_dim = 64;
  c.adaln_out_features = 18 * 256;
  c.final_adaln_out_features = 2 * 256;
  ops::CudaContext plain, timed;
  timed.set_timed_choices(4, true);
  const PackedLayout layout = pack_layout(16, 8, 32, 64, 100);  // 4,096 video rows + text + audio
  const PackedTimesteps ts = pack_timesteps(layout, 0.7f, 0.6f);
  TensorMap outs[2];
  int i = 0;
  for (ops::CudaContext* ctx : {&plain, &timed}) {
    const H3Model model(*ctx, c, DType::BF16, 7);
    Tensor text = ctx->empty({16, c.text_dim}, DType::F32);
    Tensor video =
        ctx->empty({static_cast<int64_t>(layout.img_pos.size()), c.video_patch_dim()}, DType::F32);
    Tensor audio = ctx->empty({static_cast<int64_t>(layout.audio_pos.size()), c.audio_latents_dim},
                              DType::F32);
    ops::fill_normal(*ctx, text, 1, 0.f, 1.f);
    ops::fill_normal(*ctx, video, 2, 0.f, 1.f);
    ops::fill_normal(*ctx, audio, 3, 0.f, 1.f);
    const H3Outputs o =
        model.forward(model.plan(layout), model.tables(ts.unique),
                      ops::index_tensor(*ctx, adaln_rows(layout, ts)),
                      ops::index_tensor(*ctx, ts.inverse), model.refine_text(text), video, audio);
    outs[i]["video"] = ctx->download(o.video);
    outs[i]["audio"] = ctx->download(o.audio);
    ++i;
  }
  std::printf("timed GEMM choices: %zu shapes timed\n", timed.gemm().tune_log().size());
  EXPECT_GT(timed.gemm().tune_log().size(), 0u);
  for (const char* name : {"video", "audio"}) {
    const Diff d = compare(outs[1].at(name), outs[0].at(name));
    std::printf("  %s timed vs default %.3e of max\n", name, d.rel());
    EXPECT_LE(d.rel(), kBf16Tolerance) << name;
  }
}

}  // namespace
}  // namespace avdit::models::h3
