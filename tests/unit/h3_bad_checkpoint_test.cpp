// Bad H3 checkpoints and inputs are rejected with BadInput naming the tensor (and the file):
// a missing tensor, a misshapen tensor, a non-float tensor, a missing config, bad latents.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "ops/context.h"

namespace avdit::models::h3 {
namespace {

const std::filesystem::path kTiny = std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "h3-tiny";

// A copy of the tiny checkpoint with `edit` applied to its tensor list, in a fresh folder.
std::filesystem::path edited_copy(
    const std::string& name,
    const std::function<void(std::vector<std::pair<std::string, Tensor>>&)>& edit,
    bool with_config = true) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("avdit_h3_bad_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const Checkpoint ckpt = Checkpoint::open(kTiny);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& n : ckpt.names()) tensors.emplace_back(n, ckpt.get(n));
  edit(tensors);
  write_safetensors(dir / "model.safetensors", tensors);
  if (with_config) std::filesystem::copy_file(kTiny / "config.json", dir / "config.json");
  return dir;
}

// Loading the folder must throw BadInput whose message contains every part of `parts`.
void expect_bad_input(const std::filesystem::path& dir, std::vector<std::string> parts) {
  try {
    const Checkpoint ckpt = Checkpoint::open(dir);
    ops::CpuContext ctx_model;
    const H3Model model(ctx_model, ckpt);
    ADD_FAILURE() << "no error for " << dir;
  } catch (const BadInput& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message lacks '" << p << "': " << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(H3BadCheckpoint, MissingTensorIsNamed) {
  const auto dir = edited_copy("missing", [](auto& t) {
    std::erase_if(t, [](const auto& p) { return p.first == "blocks.1.attn.k_norm.weight"; });
  });
  expect_bad_input(dir, {"blocks.1.attn.k_norm.weight", "missing", dir.string()});
}

TEST(H3BadCheckpoint, WrongShapeIsNamed) {
  const auto dir = edited_copy("shape", [](auto& t) {
    for (auto& [n, x] : t)
      if (n == "blocks.2.mlp.fc2.weight") x = Tensor::zeros({192, 255}, DType::BF16);
  });
  expect_bad_input(dir, {"blocks.2.mlp.fc2.weight", "[192, 255]", "[192, 256]",
                        (dir / "model.safetensors").string()});
}

TEST(H3BadCheckpoint, NonFloatTensorIsNamed) {
  const auto dir = edited_copy("dtype", [](auto& t) {
    for (auto& [n, x] : t)
      if (n == "final_layer.norm.weight") x = Tensor::zeros({192}, DType::I32);
  });
  expect_bad_input(dir, {"final_layer.norm.weight", "I32"});
}

TEST(H3BadCheckpoint, MissingConfigIsExplained) {
  const auto dir = edited_copy("noconfig", [](auto&) {}, /*with_config=*/false);
  expect_bad_input(dir, {"config.json"});
}

TEST(H3BadInputs, MissingAndMisshapenLatentsAreNamed) {
  const Checkpoint ckpt = Checkpoint::open(kTiny);
  ops::CpuContext ctx_model;
  const H3Model model(ctx_model, ckpt);
  const TensorMap good = read_all(kTiny / "inputs.safetensors");
  auto message = [&](const TensorMap& in) -> std::string {
    try {
      forward_from_inputs(model, in, false);
    } catch (const BadInput& e) {
      return e.what();
    }
    return "no error";
  };
  TensorMap in = good;
  in.erase("video_latent");
  EXPECT_NE(message(in).find("video_latent"), std::string::npos) << message(in);
  in = good;
  in["audio_latent"] = Tensor::zeros({1, 32, 12}, DType::F32);
  EXPECT_NE(message(in).find("audio_latent"), std::string::npos) << message(in);
  in = good;
  in["text_embeds"] = Tensor::zeros({8, 65}, DType::F32);
  EXPECT_NE(message(in).find("text_embeds"), std::string::npos) << message(in);
  in = good;
  in.erase("t_video");
  in.erase("sigma_video");
  EXPECT_NE(message(in).find("sigma_video"), std::string::npos) << message(in);
  in = read_all(kTiny / "inputs_fl2va.safetensors");
  const int64_t bad_index[2] = {0, 3};
  in["keyframe_frame_indices"] = Tensor::from_data({2}, DType::I64, bad_index);
  EXPECT_NE(message(in).find("keyframe_frame_indices"), std::string::npos) << message(in);
}

}  // namespace
}  // namespace avdit::models::h3
