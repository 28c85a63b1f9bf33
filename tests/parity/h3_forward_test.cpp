// Parity of the MiniMax-H3 forward (CPU, float32) with ../shared/golden/h3-tiny, both cases
// (T2VA and FL2VA): every output and intermediate within 1e-4 of its max |value|, and the packing
// avdit builds from the unpacked inputs equal to the fixture's packed tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "models/h3/packing.h"
#include "ops/context.h"

namespace avdit::models::h3 {
namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "h3-tiny";
constexpr double kTolerance = 1e-4;  // of max |reference|; the reference vs float64: < 4e-6

struct Diff {
  double max_abs = 0, max_ref = 0;
  double rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
};

Diff compare(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(DType::F64), w = want.to(DType::F64);
  Diff d;
  for (int64_t i = 0; i < w.numel(); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(g.data<double>()[i] - w.data<double>()[i]));
    d.max_ref = std::max(d.max_ref, std::fabs(w.data<double>()[i]));
  }
  return d;
}

class H3Parity : public ::testing::TestWithParam<const char*> {
 protected:
  std::string inputs_file() const {
    return std::string(GetParam()) == "t2va" ? "inputs.safetensors" : "inputs_fl2va.safetensors";
  }
  std::string outputs_file() const {
    return std::string(GetParam()) == "t2va" ? "outputs.safetensors"
                                              : "outputs_fl2va.safetensors";
  }
};

// Every tensor of the outputs file, by name, within kTolerance of its max |value|.
TEST_P(H3Parity, ForwardMatchesEveryTensor) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  ops::CpuContext ctx;
  const H3Model model(ctx, ckpt);
  const TensorMap inputs = read_all(kFixture / inputs_file());
  const TensorMap want = read_all(kFixture / outputs_file());
  const TensorMap got = forward_from_inputs(model, inputs, /*dump=*/true);
  int compared = 0;
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, ref] : want) {
    auto it = got.find(name);
    EXPECT_NE(it, got.end()) << "avdit did not produce " << name;
    if (it == got.end()) continue;
    ASSERT_EQ(it->second.shape(), ref.shape()) << name;
    const Diff d = compare(it->second, ref);
    std::printf("  %-26s max|diff| %.3e  max|ref| %.3e  rel %.3e\n", name.c_str(), d.max_abs,
                d.max_ref, d.rel());
    EXPECT_LE(d.rel(), kTolerance) << name;
    ++compared;
    if (d.rel() >= worst) {
      worst = d.rel();
      worst_name = name;
    }
  }
  std::printf("[%s] compared %d tensors; worst %s at %.3g of max\n", GetParam(), compared,
              worst_name.c_str(), worst);
  EXPECT_EQ(compared, static_cast<int>(want.size()));
}

// The packing avdit builds equals the fixture's packed tensors (positions after the float32 cast
// the model applies; within 1e-12 in float64).
TEST_P(H3Parity, PackingMatchesFixture) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  ops::CpuContext ctx;
  const H3Model model(ctx, ckpt);
  const TensorMap inputs = read_all(kFixture / inputs_file());
  const TensorMap got = forward_from_inputs(model, inputs, /*dump=*/true);
  for (const char* name :
       {"token_tags", "input_ids", "inverse_indices", "unique_timesteps", "combined_indices",
        "cu_seqlens", "refiner_cu_seqlens", "img_pos", "img_pos_for_infer_output", "audio_pos",
        "text_pos", "update_mask", "update_audio_mask", "seq_len", "used_len", "max_seqlen",
        "video_rows", "audio_rows", "condition_img_pos", "target_img_pos",
        "keyframe_temporal_positions", "img_position_ids"}) {
    auto want = inputs.find(name);
    if (want == inputs.end()) continue;  // T2VA has no condition tensors
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    ASSERT_EQ(it->second.shape(), want->second.shape()) << name;
    const Diff d = compare(it->second, want->second);
    EXPECT_LE(d.max_abs, 1e-12) << name;
    if (std::string(name) == "img_position_ids") {  // equal after the float32 cast
      const Tensor g = it->second.to(DType::F32), w = want->second.to(DType::F32);
      for (int64_t i = 0; i < w.numel(); ++i) ASSERT_EQ(g.f32()[i], w.f32()[i]) << name << " " << i;
    }
  }
}

// Emulated bf16 production mode against the fp32 golden. The reference's own bf16 run differs
// from its fp32 run by up to 0.0094 of max |value| (README "Observed tolerances"); the stated
// bf16 tolerance here is 3e-2 of max |value| for every tensor, with a check that the mode is on.
TEST_P(H3Parity, Bf16ModeWithinStatedTolerance) {
  constexpr double kBf16Tolerance = 3e-2;
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  ops::CpuContext ctx;
  const H3Model model(ctx, ckpt, DType::BF16);
  const TensorMap inputs = read_all(kFixture / inputs_file());
  const TensorMap want = read_all(kFixture / outputs_file());
  const TensorMap got = forward_from_inputs(model, inputs, /*dump=*/true);
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, ref] : want) {
    const Diff d = compare(got.at(name), ref);
    EXPECT_LE(d.rel(), kBf16Tolerance) << name;
    if (d.rel() >= worst) {
      worst = d.rel();
      worst_name = name;
    }
  }
  for (const char* name : {"video_out", "audio_out", "hidden_block2"}) {
    const Diff d = compare(got.at(name), want.at(name));
    std::printf("  bf16 %-14s max|diff| %.3e  rel %.3e\n", name, d.max_abs, d.rel());
    EXPECT_GT(d.rel(), 1e-4) << name << ": bf16 rounding seems off";
  }
  std::printf("[%s bf16] worst %s at %.3g of max\n", GetParam(), worst_name.c_str(), worst);
}

// H3Stepper (the sampler's entry point) reproduces the DiT velocities the reference sampler
// recorded at each of its 4 steps (sampler.safetensors: same weights, text and T2VA layout).
TEST(H3Velocity, MatchesSamplerFixtureSteps) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  ops::CpuContext ctx;
  const H3Model model(ctx, ckpt);
  H3Stepper stepper(model);
  const TensorMap inputs = read_all(kFixture / "inputs.safetensors");
  const TensorMap s = read_all(kFixture / "sampler.safetensors");
  const Tensor text = model.refine_text(inputs.at("text_embeds"));
  const Tensor& video_latent = inputs.at("video_latent");  // [1, 24, T, H, W]
  const int64_t T = video_latent.size(2), H = video_latent.size(3), W = video_latent.size(4);
  const int64_t Ta = inputs.at("audio_latent").size(2);
  const Tensor lat_v = s.at("latents_video_rows"), lat_a = s.at("latents_audio_rows");
  const Tensor vel_v = s.at("velocity_video_rows"), vel_a = s.at("velocity_audio_rows");
  for (int64_t k = 0; k < vel_v.size(0); ++k) {
    VelocityRequest r;
    r.video_latent = unpatchify_video(lat_v.select(k), 24, T, H, W);
    r.audio_latent = unpack_audio(lat_a.select(k), Ta);
    r.sigma_video = s.at("sigmas_video").f32()[k];
    r.sigma_audio = s.at("sigmas_audio").f32()[k];
    r.text_refined = text;
    const Velocity v = stepper.velocity(r);
    const Diff dv = compare(patchify_video(v.video), vel_v.select(k));
    const Diff da = compare(pack_audio(v.audio), vel_a.select(k));
    std::printf("  step %ld velocity video %.3e / %.3e  audio %.3e / %.3e\n",
                static_cast<long>(k), dv.max_abs, dv.max_ref, da.max_abs, da.max_ref);
    EXPECT_LE(dv.rel(), kTolerance) << "step " << k;
    EXPECT_LE(da.rel(), kTolerance) << "step " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, H3Parity, ::testing::Values("t2va", "fl2va"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace avdit::models::h3
