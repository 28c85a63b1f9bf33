// H3 on random weights of a small config written by init_checkpoint: outputs finite and of a
// realistic scale, bit-identical on rerun and across two inits with the same seed; keyframe rows
// zeroed; the curve-table variant detected from the weights and run.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <filesystem>

#include "core/rng.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/h3/config.h"
#include "models/h3/model.h"
#include "ops/context.h"
#include "models/h3/time_embedding.h"

namespace avdit::models::h3 {
namespace {

nlohmann::json small_config() {
  return {{"_class_name", "MiniMaxH3DiTModel"},
          {"hidden_size", 48},
          {"num_layers", 2},
          {"token_refiner_num_layers", 1},
          {"num_attention_heads", 2},
          {"attention_head_dim", 128},
          {"ffn_hidden_size", 80},
          {"latents_dim", 24},
          {"audio_latents_dim", 32},
          {"patch_size", {1, 2, 2}},
          {"text_dim", 40},
          {"timestep_input_dim", 256},
          {"time_embed_hidden_size", 48},
          {"time_embed_dim", 24},
          {"adaln_out_features", 18 * 48},
          {"final_adaln_out_features", 2 * 48},
          {"rope_inv_freq_len", 16},
          {"norm_eps", 1e-5},
          {"qk_norm_eps", 1e-5},
          {"final_norm_eps", 1e-5}};
}

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("avdit_h3_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

Tensor randn(Shape shape, uint64_t stream) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  fill_normal(t, 1234, stream);
  return t;
}

TensorMap random_inputs(bool keyframes) {
  TensorMap in;
  in["video_latent"] = randn({1, 24, 3, 4, 6}, 1);
  in["audio_latent"] = randn({2, 32, 7}, 2);
  in["text_embeds"] = randn({5, 40}, 3);
  in["sigma_video"] = Tensor::from_floats({0.8f}, {1});
  in["sigma_audio"] = Tensor::from_floats({0.6f}, {1});
  if (keyframes) {
    in["cond_latent"] = randn({1, 24, 2, 4, 6}, 4);
    const int64_t idx[2] = {0, -1};
    in["keyframe_frame_indices"] = Tensor::from_data({2}, DType::I64, idx);
    const int64_t tags[5] = {1, 0, 0, 1, 1};
    in["text_token_tags"] = Tensor::from_data({5}, DType::I64, tags);
  }
  return in;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

void expect_finite_and_realistic(const Tensor& t, const std::string& name) {
  double sum2 = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(t.f32()[i])) << name << " element " << i;
    sum2 += double(t.f32()[i]) * t.f32()[i];
  }
  const double rms = std::sqrt(sum2 / t.numel());
  EXPECT_GT(rms, 0.05) << name;
  EXPECT_LT(rms, 20.0) << name;
}

class H3Random : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = temp_dir("random");
    init_checkpoint(small_config(), dir_, 7);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::filesystem::path dir_;
};
std::filesystem::path H3Random::dir_;

TEST_F(H3Random, FiniteAndBitIdenticalOnRerun) {
  const Checkpoint ckpt = Checkpoint::open(dir_);
  ops::CpuContext ctx_model;
  const H3Model model(ctx_model, ckpt);
  for (bool keyframes : {false, true}) {
    const TensorMap in = random_inputs(keyframes);
    const TensorMap a = forward_from_inputs(model, in, /*dump=*/true);
    const TensorMap b = forward_from_inputs(model, in, /*dump=*/true);
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, t] : a) EXPECT_TRUE(bit_equal(t, b.at(name))) << name;
    for (const char* name : {"video_out_latent", "audio_out_latent", "hidden_block1"})
      expect_finite_and_realistic(a.at(name), name);
    if (keyframes) {  // 2 keyframes x 2 x 3 rows come first and are not predicted
      const Tensor& v = a.at("video_out");
      EXPECT_EQ(v.size(0), 12 + 18);
      for (int64_t i = 0; i < 12 * 96; ++i) ASSERT_EQ(v.f32()[i], 0.0f);
    }
  }
}

TEST_F(H3Random, SameSeedSameFiles) {
  const auto other = temp_dir("random_again");
  init_checkpoint(small_config(), other, 7);
  const Checkpoint a = Checkpoint::open(dir_), b = Checkpoint::open(other);
  ASSERT_EQ(a.names(), b.names());
  for (const std::string& n : a.names()) EXPECT_TRUE(bit_equal(a.get(n), b.get(n))) << n;
  // The dtypes are the official ones (BF16 blocks, F32 islands).
  EXPECT_EQ(a.info("blocks.0.attn.qkv_proj.weight").dtype, DType::BF16);
  EXPECT_EQ(a.info("video_patch_proj.weight").dtype, DType::F32);
  std::filesystem::remove_all(other);
}

TEST_F(H3Random, VelocityEqualsForward) {
  const Checkpoint ckpt = Checkpoint::open(dir_);
  ops::CpuContext ctx_model;
  const H3Model model(ctx_model, ckpt);
  const TensorMap in = random_inputs(false);
  const TensorMap f = forward_from_inputs(model, in, false);
  VelocityRequest r;
  r.video_latent = in.at("video_latent");
  r.audio_latent = in.at("audio_latent");
  r.sigma_video = 0.8f;
  r.sigma_audio = 0.6f;
  r.text_refined = model.refine_text(in.at("text_embeds"));
  H3Stepper stepper(model);
  const Velocity v = stepper.velocity(r);
  EXPECT_TRUE(bit_equal(v.video, f.at("video_out_latent")));
  EXPECT_TRUE(bit_equal(v.audio, f.at("audio_out_latent")));
}

// used_len already a multiple of 64: no pad rows, the second attention document is empty.
TEST_F(H3Random, NoPadRowsWhenUsedLenIsAMultipleOf64) {
  const Checkpoint ckpt = Checkpoint::open(dir_);
  ops::CpuContext ctx_model;
  const H3Model model(ctx_model, ckpt);
  TensorMap in = random_inputs(false);
  in["text_embeds"] = randn({8, 40}, 5);       // 8 text rows
  in["audio_latent"] = randn({2, 32, 10}, 6);  // 20 audio rows
  in["video_latent"] = randn({1, 24, 4, 6, 6}, 7);  // 4 x 3 x 3 = 36 video rows
  const TensorMap out = forward_from_inputs(model, in, true);
  EXPECT_EQ(out.at("seq_len").data<int64_t>()[0], 64);
  EXPECT_EQ(out.at("used_len").data<int64_t>()[0], 64);
  expect_finite_and_realistic(out.at("video_out_latent"), "video_out_latent");
  expect_finite_and_realistic(out.at("audio_out_latent"), "audio_out_latent");
}

// The forward's peak activations are the residual stream and the norm output plus the larger of
// the two stages (attention: qkv beside q/k/v; MLP: fc1's output beside the gated half), not the
// sum of every temporary of a block: the bytes counted by the context, against that count made
// from the config, with 20% for what lives beside them (the packed inputs, RoPE tables). Sizes
// where keeping every temporary alive costs ~40%.
TEST_F(H3Random, PeakActivationsAreOneStageNotTheBlock) {
  const Checkpoint ckpt = Checkpoint::open(dir_);
  ops::CpuContext ctx;
  const H3Model model(ctx, ckpt);
  TensorMap in = random_inputs(false);
  in["video_latent"] = randn({1, 24, 4, 32, 32}, 8);  // 4 x 16 x 16 = 1,024 video rows
  const TensorMap shapes = forward_from_inputs(model, in, /*dump=*/true);
  const int64_t S = shapes.at("seq_len").data<int64_t>()[0];
  ASSERT_GE(S, 1024);
  const H3Config& c = model.config();
  const int64_t H = c.hidden_size, I = c.num_attention_heads * c.attention_head_dim,
                F = c.ffn_hidden_size, a = 4;  // CPU activations are F32
  const int64_t residual_and_norm = S * H * 4 + S * H * a;
  const int64_t attention_stage = 6 * S * I * a;       // qkv + q, k, v
  const int64_t mlp_stage = (2 * F + F + H) * S * a;   // fc1 out + gated + fc2 out
  const int64_t stages = std::max(attention_stage, mlp_stage);
  const int64_t all_alive = residual_and_norm + S * H * 4 + attention_stage + S * I * a + 2 * S * H * a +
                            3 * S * F * a;
  const int64_t before = ctx.pool_in_use();
  ctx.reset_pool_peak();
  const TensorMap out = forward_from_inputs(model, in, /*dump=*/false);
  const int64_t peak = ctx.pool_peak() - before;
  EXPECT_GE(peak, residual_and_norm + stages);
  EXPECT_LE(peak, (residual_and_norm + stages) * 6 / 5)
      << "peak " << peak << " bytes; one stage " << residual_and_norm + stages << ", every temporary "
      << all_alive;
  EXPECT_LT((residual_and_norm + stages) * 6 / 5, all_alive);  // the bound can tell them apart
}

TEST(H3RandomCurve, CurveTableVariantIsDetectedAndRuns) {
  nlohmann::json config = small_config();
  config["adaln_curve_grid"] = 17;
  config["time_embed_dim"] = 8;
  const auto dir = temp_dir("curve");
  init_checkpoint(config, dir, 3);
  const Checkpoint ckpt = Checkpoint::open(dir);
  EXPECT_TRUE(ckpt.contains("adaln_t_table"));
  EXPECT_FALSE(ckpt.contains("time_embedder.proj_in.weight"));
  // The variant comes from the weights even when config.json does not say so.
  nlohmann::json plain = small_config();
  plain["time_embed_dim"] = 8;
  ops::CpuContext ctx_model;
  const H3Model model(ctx_model, ckpt, H3Config::from_json(plain));
  EXPECT_TRUE(model.config().curve_variant());
  EXPECT_EQ(model.config().adaln_curve_grid, 17);
  const TensorMap out = forward_from_inputs(model, random_inputs(true), true);
  EXPECT_EQ(out.count("t_emb"), 0u);
  expect_finite_and_realistic(out.at("video_out_latent"), "video_out_latent");
  expect_finite_and_realistic(out.at("audio_out_latent"), "audio_out_latent");
  std::filesystem::remove_all(dir);
}

// A curve table sampled from the full model's own silu(time_embedder(t)) (basis = identity, so
// k = time_embed_dim) must give the full model's outputs at timesteps on the grid.
TEST(H3RandomCurve, CurveTableOfTheFullModelReproducesIt) {
  const auto tiny = std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "h3-tiny";
  const Checkpoint full_ckpt = Checkpoint::open(tiny);
  ops::CpuContext ctx_full;
  const H3Model full(ctx_full, full_ckpt);
  const std::vector<float> grid = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f};
  const Tensor table = full.tables(grid).adaln_input;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& n : full_ckpt.names()) {
    if (n.rfind("time_embedder.", 0) == 0) continue;
    Tensor t = full_ckpt.get(n);
    if (n.find("adaln_proj.") != std::string::npos) t = t.to(DType::F32);
    tensors.emplace_back(n, t);
  }
  tensors.emplace_back("adaln_t_table", table);
  const auto dir = temp_dir("curve_of_full");
  std::filesystem::create_directories(dir);
  write_safetensors(dir / "model.safetensors", tensors);
  std::filesystem::copy_file(tiny / "config.json", dir / "config.json");
  const Checkpoint curve_ckpt = Checkpoint::open(dir);
  ops::CpuContext ctx_curve;
  const H3Model curve(ctx_curve, curve_ckpt);
  ASSERT_TRUE(curve.config().curve_variant());
  TensorMap in = read_all(tiny / "inputs.safetensors");
  in.erase("t_video");
  in.erase("t_audio");
  in["sigma_video"] = Tensor::from_floats({0.75f}, {1});  // t = 0.25, grid row 1
  in["sigma_audio"] = Tensor::from_floats({0.5f}, {1});   // t = 0.5, grid row 2
  const TensorMap a = forward_from_inputs(full, in, false);
  const TensorMap b = forward_from_inputs(curve, in, false);
  for (const char* name : {"video_out", "audio_out"}) {
    const Tensor& x = a.at(name);
    const Tensor& y = b.at(name);
    double diff = 0;
    for (int64_t i = 0; i < x.numel(); ++i)
      diff = std::max(diff, std::fabs(double(x.f32()[i]) - y.f32()[i]));
    EXPECT_LE(diff, 1e-5) << name;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace avdit::models::h3
