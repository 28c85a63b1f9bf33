// The MAGI-2 preview forward at a size of our own: random weights via init_checkpoint, then a
// forward that must be finite and bit-identical when run again.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/rng.h"
#include "io/safetensors.h"
#include "models/magi2/api.h"
#include "ops/context.h"

namespace avdit::models::magi2 {
namespace {

nlohmann::json small_config() {
  return nlohmann::json::parse(R"({
    "arch_config": {
      "num_layers": 4, "hidden_size": 96, "head_dim": 32, "num_query_groups": 1,
      "video_in_channels": 16, "audio_in_channels": 8, "text_in_channels": 24,
      "params_dtype": "bfloat16", "intermediate_factor": 4, "mm_layers": [0, 3],
      "activation_type": "swiglu7", "attn_softcap": -1.0,
      "attn_gating": {"enable": true}, "attn_sinks": {"enable": true, "sink_token_num": 1},
      "mhc_config": {"enable": true, "num_stream": 2, "alpha_init": 0.01},
      "moe_config": {"score_func": "sigmoid", "route_norm": true, "route_scale": 2.5, "moe_layers": [1, 2],
                     "num_heads": 3, "num_experts": 8, "top_k": 2, "expert_intermediate_size": 40,
                     "shared_expert_intermediate_size": 24, "modality_specific_expert_intermediate_size": 16,
                     "split_merge_intermediate_size": 48}
    },
    "evaluation_config": {"data_proxy_config": {"t_patch_size": 1, "patch_size": 2,
                          "spatial_rope_interpolation": "extra", "add_time_token": false, "time_channel_dim": 32}}
  })");
}

Tensor random(Shape shape, uint64_t stream) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  fill_normal(t, 7, stream);
  return t;
}

TEST(Magi2Random, FiniteAndDeterministic) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("avdit_magi2_random_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  init_checkpoint(small_config(), dir, 1234);
  const Checkpoint ckpt = Checkpoint::open(dir);

  // Video latent [B=2, C=4, T=2, H=4, W=6] with 2x2 spatial patches -> 16 channels per token.
  TensorMap in;
  in["video_latent"] = random({2, 4, 2, 4, 6}, 1);
  in["audio_latent"] = random({2, 5, 8}, 2);
  in["txt_feat"] = random({2, 3, 24}, 3);
  in["txt_feat_len"] = Tensor::from_data({2}, DType::I64, std::vector<int64_t>{3, 2}.data());
  in["audio_feat_len"] = Tensor::from_data({2}, DType::I64, std::vector<int64_t>{5, 4}.data());
  Tensor ptv = Tensor::empty({2, 1, 2, 4, 6}, DType::F32);
  for (int64_t i = 0; i < ptv.numel(); ++i) ptv.f32()[i] = i < 48 ? 0.7f : 0.3f;
  in["per_token_video_t"] = ptv;
  Tensor pta = Tensor::empty({2, 5, 1}, DType::F32);
  for (int64_t i = 0; i < pta.numel(); ++i) pta.f32()[i] = 0.5f;
  in["per_token_audio_t"] = pta;

  ops::CpuContext ctx;
  const Magi2Model model(ctx, ckpt);
  const TensorMap a = forward_from_inputs(model, in, true);
  const TensorMap b = forward_from_inputs(Magi2Model(ctx, ckpt), in, true);
  ASSERT_EQ(a.at("video_velocity").shape(), (Shape{2, 4, 2, 4, 6}));
  ASSERT_EQ(a.at("audio_velocity").shape(), (Shape{2, 5, 8}));
  ASSERT_EQ(a.at("model_output").shape(), (Shape{2 * (12 + 5 + 3) - 1 - 1, 16}));
  double max_abs = 0;
  for (const auto& [name, t] : a) {
    if (t.dtype() != DType::F32) continue;
    for (int64_t i = 0; i < t.numel(); ++i)
      ASSERT_TRUE(std::isfinite(t.f32()[i])) << name << "[" << i << "]";
    ASSERT_EQ(std::memcmp(t.raw(), b.at(name).raw(), t.nbytes()), 0)
        << name << " differs between runs";
    if (name == "model_output")
      for (int64_t i = 0; i < t.numel(); ++i)
        max_abs = std::max(max_abs, static_cast<double>(std::fabs(t.f32()[i])));
  }
  std::printf("random config: max|model_output| %.3g\n", max_abs);
  for (const char* name :
       {"embed", "layers.1.attn_out", "layers.1.moe.experts_out", "layers.3.output"}) {
    const Tensor& t = a.at(name);
    double ss = 0;
    for (int64_t i = 0; i < t.numel(); ++i) ss += static_cast<double>(t.f32()[i]) * t.f32()[i];
    std::printf("  rms %-26s %.3g\n", name, std::sqrt(ss / static_cast<double>(t.numel())));
  }
  // Realistic scale: neither vanishing nor exploding.
  EXPECT_GT(max_abs, 1e-2);
  EXPECT_LT(max_abs, 1e3);
  // Audio rows past audio_feat_len are zero in the velocity.
  const Tensor& av = a.at("audio_velocity");
  for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(av.f32()[(1 * 5 + 4) * 8 + c], 0.0f);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace avdit::models::magi2
