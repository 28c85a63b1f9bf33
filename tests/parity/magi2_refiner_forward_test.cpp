// Parity of the MAGI-2 1080p refiner forward (CPU, float32) with
// ../shared/golden/magi2-refiner-tiny: the official-layout checkpoint loaded strictly, then embed,
// rope, every layers.{i}.output, layer 0's attention kernel inputs and output (q, k, v, out, lse),
// model_output and the de-packed video / audio velocities, each within the README's 2e-5 of its max
// |value|; the windowed attention op alone on the stored q, k, v; and a checkpoint with a foreign
// tensor refused.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/magi2/refiner/model.h"
#include "models/magi2/refiner/window_ranges.h"
#include "ops/context.h"
#include "ops/windowed_attention.h"
#include "testing/golden_compare.h"

namespace avdit::models::magi2::refiner {
namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "magi2-refiner-tiny";
constexpr double kBar = 2e-5;  // README: every float tensor of the forward (observed <= 1.64e-6)

double check(const Tensor& got, const Tensor& want, const std::string& name) {
  EXPECT_EQ(got.numel(), want.numel()) << name;
  const double e = testing::golden_rel_err(got, want);
  std::printf("  %-22s %.3g of max\n", name.c_str(), e);
  EXPECT_LE(e, kBar) << name;
  return e;
}

TEST(Magi2RefinerParity, ForwardMatchesEveryRecordedTensor) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const TensorMap in = read_all(kFixture / "inputs.safetensors");
  const TensorMap out = read_all(kFixture / "outputs.safetensors");
  const TensorMap mid = read_all(kFixture / "intermediates.safetensors");
  ops::CpuContext ctx;
  const RefinerModel model(ctx, ckpt, DType::F32);
  const Tensor& video = in.at("video_latent");
  const Tensor& audio = in.at("audio_latent");
  const Tensor& text = in.at("txt_feat");
  const RefinerPlan plan = model.plan(video.shape(), audio.size(1), text.size(1));

  testing::CapturePoints probe;
  Tensor model_output;
  {
    const ProbeScope scope(ctx.observer(), &probe);
    model_output = model.forward_packed(plan, in.at("x"));
  }
  check(model_output, out.at("model_output"), "model_output");
  check(probe.got.at("embed"), out.at("embed"), "embed");
  check(probe.got.at("rope"), out.at("rope"), "rope");
  int layers = 0;
  for (int64_t i = 0; out.count("layers." + std::to_string(i) + ".output"); ++i, ++layers) {
    const std::string name = "layers." + std::to_string(i) + ".output";
    check(probe.got.at(name), out.at(name), name);
  }
  EXPECT_EQ(layers, model.config().num_layers);
  for (const char* n : {"q", "k", "v", "out", "lse"}) {
    const std::string name = std::string("layers.0.attn.") + n;
    check(probe.got.at(name), mid.at(name), name);
  }

  // The de-packed velocities from the un-packed inputs (the packing's own x).
  const auto [vv, av] = model.velocity(plan, video, audio, text);
  EXPECT_EQ(vv.shape(), out.at("video_velocity").shape());
  EXPECT_EQ(av.shape(), out.at("audio_velocity").shape());
  check(vv, out.at("video_velocity"), "video_velocity");
  check(av, out.at("audio_velocity"), "audio_velocity");
}

TEST(Magi2RefinerParity, WindowedAttentionAloneOnStoredKernelInputs) {
  const RefinerConfig c = parse_refiner_config(read_json(kFixture / "config.json"));
  const TensorMap in = read_all(kFixture / "inputs.safetensors");
  const TensorMap mid = read_all(kFixture / "intermediates.safetensors");
  const RefinerLayout l = refiner_layout(c, in.at("video_latent").shape(),
                                         in.at("audio_latent").size(1), in.at("txt_feat").size(1));
  ops::CpuContext ctx;
  const ops::WindowPlan plan = ops::plan_window(
      ctx, window_range_list(l.grid, c.data_proxy.window, l.tokens()), l.tokens(), l.tokens());
  Tensor lse = Tensor::empty({l.tokens(), c.num_heads_q}, DType::F32);
  const Tensor o = ops::windowed_attention(
      ctx, mid.at("layers.0.attn.q"), mid.at("layers.0.attn.k"), mid.at("layers.0.attn.v"),
      1.0f / std::sqrt(static_cast<float>(c.head_dim)), plan, nullptr, DType::F32, &lse);
  check(o, mid.at("layers.0.attn.out"), "windowed op: out");
  check(lse, mid.at("layers.0.attn.lse"), "windowed op: lse");
  // The window matters: every query seeing every key is far off (README: 0.166 of max at the end).
  const ops::WindowPlan full =
      ops::plan_window(ctx, {{{0, l.tokens()}, {0, l.tokens()}}}, l.tokens(), l.tokens());
  const Tensor dense = ops::windowed_attention(
      ctx, mid.at("layers.0.attn.q"), mid.at("layers.0.attn.k"), mid.at("layers.0.attn.v"),
      1.0f / std::sqrt(static_cast<float>(c.head_dim)), full);
  EXPECT_GT(testing::golden_rel_err(dense, mid.at("layers.0.attn.out")), 100 * kBar);
}

TEST(Magi2RefinerParity, WrongVideoLatentIsBadInput) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  ops::CpuContext ctx;
  const RefinerModel model(ctx, ckpt, DType::F32);
  const RefinerPlan plan = model.plan({1, 48, 9, 8, 13}, 0, 24);
  const Tensor text = Tensor::zeros({1, 24, 64}, DType::F32);
  const Tensor audio = Tensor::zeros({1, 0, 64}, DType::F32);
  EXPECT_THROW(model.velocity(plan, Tensor::zeros({1, 48, 9, 8, 12}, DType::F32), audio, text),
               BadInput);
  EXPECT_THROW(model.plan({1, 16, 9, 8, 13}, 0, 24), BadInput);
}

// load_state_dict(strict=True): the golden's weights under a config of one layer fewer (a tensor
// the network does not have) or one more (a tensor missing) are refused, naming the tensor.
TEST(Magi2RefinerParity, CheckpointIsLoadedStrictly) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("avdit_refiner_strict_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink(kFixture / "model.safetensors", dir / "model.safetensors");
  for (const int layers : {3, 5}) {
    nlohmann::json config = read_json(kFixture / "config.json");
    config["magi2_refiner_arch_config"]["num_layers"] = layers;
    if (layers == 3) config["magi2_refiner_arch_config"]["mm_layers"] = {0};
    std::ofstream(dir / "config.json") << config.dump();
    const Checkpoint ckpt = Checkpoint::open(dir);
    ops::CpuContext ctx;
    try {
      const RefinerModel model(ctx, ckpt, DType::F32);
      ADD_FAILURE() << layers << " layers: loaded";
    } catch (const BadInput& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(layers == 3 ? "block.layers.3." : "block.layers.4."), std::string::npos)
          << what;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace avdit::models::magi2::refiner
