// The device solvers and CFG against the CPU ones, bit for bit: FlowUniPC over a full 12-step
// schedule (warm-up, order 2, lower_order_final), H3 Euler, plain and per-frame CFG, on fresh
// random latents and velocities; then both generate pipelines with the device sampler backend and
// the CPU forward must give the same final latents, bytes included, as the all-CPU run.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/sample_cuda.h"
#include "io/safetensors.h"
#include "pipeline/generate_h3.h"
#include "pipeline/generate_magi2.h"
#include "sample/cfg.h"
#include "sample/schedule.h"
#include "sample/unipc.h"

namespace avdit::cuda {
namespace {

Tensor random(Shape shape, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(gen);
  return t;
}

// Number of elements whose bits differ.
int64_t bit_diffs(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) n += std::memcmp(a.f32() + i, b.f32() + i, sizeof(float)) != 0;
  return n;
}

TEST(SamplerCuda, UniPCMatchesCpuBitForBit) {
  Device dev;
  const std::vector<float> sigmas = sample::magi2_schedule(12, 7.0).sigmas;
  sample::FlowUniPC cpu(sigmas);
  auto gpu = make_unipc_stepper(dev, sigmas);
  Tensor x = random({2, 3, 5, 7, 9}, 1);
  Tensor xd = to_device(dev, x);
  for (int i = 0; i < 12; ++i) {
    // A velocity that depends on the state, like a model's, so the history matters.
    Tensor v = random(x.shape(), 100 + i, 0.5f);
    for (int64_t k = 0; k < v.numel(); ++k) v.f32()[k] += 0.3f * x.f32()[k];
    x = cpu.step(v, x);
    xd = gpu->step({i, 12}, to_device(dev, v), xd);
    EXPECT_EQ(bit_diffs(to_host(dev, xd), x), 0) << "step " << i;
  }
}

TEST(SamplerCuda, H3EulerMatchesCpuBitForBit) {
  Device dev;
  const sample::H3Schedule s = sample::h3_schedule(8, 12.0, 3.0);
  auto gpu = make_h3_euler_stepper(dev, s.video_t, s.video_ratio);
  auto cpu = sample::make_h3_euler_stepper(s.video_t, s.video_ratio);
  Tensor x = random({1, 24, 3, 4, 6}, 2);
  Tensor xd = to_device(dev, x);
  for (int i = 0; i < 8; ++i) {
    const Tensor v = random(x.shape(), 200 + i);
    x = cpu->step({i, 8}, v, x);
    xd = gpu->step({i, 8}, to_device(dev, v), xd);
    EXPECT_EQ(bit_diffs(to_host(dev, xd), x), 0) << "step " << i;
  }
}

TEST(SamplerCuda, CfgMatchesCpuBitForBit) {
  Device dev;
  const Tensor c = random({2, 4, 6, 5, 3}, 3), u = random({2, 4, 6, 5, 3}, 4), x = random({2, 4, 6, 5, 3}, 5);
  sample::Magi2Guidance g;
  g.video_scale = 5.0f;
  g.use_cfg_trick = true;  // per-frame scales: frames [0, 2) get min(2, 5)
  g.cfg_trick_start_frame = 2;
  const Tensor want = sample::magi2_cfg_video(c, u, x, g, 900);
  const Tensor got = cfg_combine(dev, to_device(dev, c), to_device(dev, u), sample::magi2_video_scales(g, 6, 900), 15);
  EXPECT_EQ(bit_diffs(to_host(dev, got), want), 0);
  const Tensor plain = cfg_combine(dev, to_device(dev, c), to_device(dev, u), {7.0f}, 1);
  EXPECT_EQ(bit_diffs(to_host(dev, plain), sample::cfg_combine(c, u, 7.0f)), 0);
}

TEST(SamplerCuda, RejectsHostTensorsAndShapeMismatch) {
  Device dev;
  const Tensor c = random({4}, 6);
  EXPECT_THROW(cfg_combine(dev, c, c, {2.0f}, 1), BadInput);
  EXPECT_THROW(cfg_combine(dev, to_device(dev, c), to_device(dev, random({5}, 7)), {2.0f}, 1), BadInput);
}

// The pipelines with the device sampler and the CPU forward: the same bits as all-CPU.
TEST(SamplerCuda, Magi2GenerateWithDeviceSamplerEqualsCpu) {
  const std::string dir = std::string(AVDIT_SHARED_DIR) + "/golden/magi2-tiny";
  const Checkpoint ckpt = Checkpoint::open(dir);
  const TensorMap f = read_all(dir + "/sampler.safetensors");
  pipeline::Magi2GenerateOptions o;
  o.text = {f.at("txt_feat"), "sampler:txt_feat"};
  o.negative = {f.at("null_txt_feat"), "sampler:null_txt_feat"};
  o.run.noise_video = {f.at("init_video_latent"), "sampler:init_video_latent"};
  o.run.noise_audio = {f.at("init_audio_latent"), "sampler:init_audio_latent"};
  o.run.steps = 3;
  o.run.record_trajectory = true;
  const pipeline::GenerateResult cpu = pipeline::generate_magi2(ckpt, o);
  Device dev;
  o.run.backend = sampler_backend(dev);
  const pipeline::GenerateResult gpu = pipeline::generate_magi2(ckpt, o);
  EXPECT_EQ(bit_diffs(gpu.video, cpu.video), 0);
  EXPECT_EQ(bit_diffs(gpu.audio, cpu.audio), 0);
  ASSERT_EQ(gpu.trajectory.steps(), 3);
  EXPECT_EQ(gpu.trajectory.latents[2][0].device(), avdit::Device::CPU);  // recorded on the host
  EXPECT_EQ(bit_diffs(gpu.trajectory.velocity[1][0], cpu.trajectory.velocity[1][0]), 0);
}

TEST(SamplerCuda, H3GenerateWithDeviceSamplerEqualsCpu) {
  const std::string dir = std::string(AVDIT_SHARED_DIR) + "/golden/h3-tiny";
  const Checkpoint ckpt = Checkpoint::open(dir);
  const TensorMap in = read_all(dir + "/inputs.safetensors");
  const TensorMap f = read_all(dir + "/sampler.safetensors");
  pipeline::H3GenerateOptions o;
  o.text = {in.at("text_embeds"), "inputs:text_embeds"};
  o.run.noise_video = {f.at("noise_video"), "sampler:noise_video"};
  o.run.noise_audio = {f.at("noise_audio"), "sampler:noise_audio"};
  o.run.steps = 3;
  const pipeline::GenerateResult cpu = pipeline::generate_h3(ckpt, o);
  Device dev;
  o.run.backend = sampler_backend(dev);
  const pipeline::GenerateResult gpu = pipeline::generate_h3(ckpt, o);
  EXPECT_EQ(bit_diffs(gpu.video, cpu.video), 0);
  EXPECT_EQ(bit_diffs(gpu.audio, cpu.audio), 0);
}

}  // namespace
}  // namespace avdit::cuda
