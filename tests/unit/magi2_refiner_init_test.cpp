// Random refiner weights, both ways avdit makes them: init_refiner_checkpoint (the tiny pipeline's
// refiner/, loaded by the strict loader like an official checkpoint) and random_refiner_weights
// (drawn on the context for `avdit bench refiner`): every tensor of the official layout, the small
// tensors exactly init_checkpoint's values, the matrices at the rule's std (gain / sqrt(fan_in)),
// and a forward through them that stays finite.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "io/safetensors.h"
#include "models/magi2/init.h"
#include "models/magi2/refiner/config.h"
#include "models/magi2/refiner/init.h"
#include "models/magi2/refiner/model.h"
#include "models/magi2/refiner/weights.h"
#include "ops/context.h"

namespace avdit::models::magi2::refiner {
namespace {

const std::filesystem::path kTiny =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "magi2-refiner-tiny" / "config.json";

double sample_std(const Tensor& t) {
  const Tensor f = t.to_f32();
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    s += f.f32()[i];
    s2 += double(f.f32()[i]) * f.f32()[i];
  }
  const double n = static_cast<double>(f.numel()), m = s / n;
  return std::sqrt(s2 / n - m * m);
}

TEST(Magi2RefinerInit, CheckpointLoadsStrictlyWithTheRulesScales) {
  const nlohmann::json config = read_json(kTiny);
  const RefinerConfig c = parse_refiner_config(config);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("avdit-refiner-init-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  init_refiner_checkpoint(config, dir, 5);
  const Checkpoint ckpt = Checkpoint::open(dir);
  const std::vector<std::string> listed = ckpt.names();
  std::set<std::string> names(listed.begin(), listed.end()), want;
  for (const TensorSpec& s : refiner_tensor_specs(c)) want.insert(s.name);
  EXPECT_EQ(names, want);
  ops::CpuContext ctx;
  const RefinerModel model(ctx, ckpt, DType::F32);  // the strict loader, as for the release
  EXPECT_EQ(model.config().num_layers, c.num_layers);
  // up_gate_proj of a dense layer: [2I, hidden] values at std gain / sqrt(hidden).
  const std::string name = "block.layers.1.mlp.up_gate_proj.weight";
  const double want_std = init_linear_gain(name) / std::sqrt(double(c.hidden_size));
  EXPECT_NEAR(sample_std(ckpt.get(name)), want_std, 0.03 * want_std);
  std::filesystem::remove_all(dir);
}

TEST(Magi2RefinerInit, RandomWeightsOnTheContextFollowTheRule) {
  const RefinerConfig c = parse_refiner_config(read_json(kTiny));
  ops::CpuContext ctx;
  const uint64_t seed = 11;
  const RefinerModel model(ctx, c, DType::F32, seed);
  const RefinerWeights& w = model.weights();
  ASSERT_EQ(static_cast<int64_t>(w.layers.size()), c.num_layers);
  // Small tensors: exactly init_checkpoint's values for the same seed.
  for (const TensorSpec& s : refiner_tensor_specs(c)) {
    if (s.name != "block.layers.2.attention.q_norm.weight" && s.name != "pre_adapter.rope.bands")
      continue;
    const Tensor want = init_tensor(s, seed).to_f32();
    const Tensor got =
        (s.name == "pre_adapter.rope.bands" ? w.rope_bands : w.layers[2].attention.q_norm).to_f32();
    ASSERT_EQ(got.numel(), want.numel()) << s.name;
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_EQ(got.f32()[i], want.f32()[i]) << s.name << " [" << i << "]";
  }
  const double want_std =
      init_linear_gain("mlp.up_gate_proj.weight") / std::sqrt(double(c.hidden_size));
  EXPECT_NEAR(sample_std(w.layers[1].mlp.up_gate_proj), want_std, 0.03 * want_std);
  // A forward over a windowed layout stays finite and of the latent's shape.
  const Shape video_shape = {1, c.video_in_channels, 9, 8, 12};
  const RefinerPlan plan = model.plan(video_shape, 0, 5);
  Tensor video = Tensor::empty(video_shape, DType::F32),
         text = Tensor::empty({1, 5, c.text_in_channels}, DType::F32);
  for (int64_t i = 0; i < video.numel(); ++i) video.f32()[i] = std::sin(0.37f * float(i));
  for (int64_t i = 0; i < text.numel(); ++i) text.f32()[i] = std::cos(0.11f * float(i));
  const auto v =
      model.velocity(plan, video, Tensor::zeros({1, 0, c.audio_in_channels}, DType::F32), text);
  const Tensor y = ctx.download(v[0]).to_f32();
  ASSERT_EQ(y.shape(), video_shape);
  double peak = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(y.f32()[i])) << i;
    peak = std::max(peak, std::fabs(double(y.f32()[i])));
  }
  EXPECT_GT(peak, 0.0);
}

}  // namespace
}  // namespace avdit::models::magi2::refiner
