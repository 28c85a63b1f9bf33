// Writes H3 video VAE folders in the release's layout (config.json, source/config.json,
// source/model.safetensors) for tests: from the golden's configs and weights, or at full width with
// random weights for timing.
#pragma once

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "io/safetensors.h"
#include "testing/h3_video_vae_golden.h"

namespace avdit::testing {

// A fresh folder under the temp directory, removed with the object.
struct TempFolder {
  std::filesystem::path path;
  explicit TempFolder(const std::string& tag)
      : path(std::filesystem::temp_directory_path() / (tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path / "source");
  }
  ~TempFolder() { std::filesystem::remove_all(path); }
};

inline void write_json(const std::filesystem::path& p, const nlohmann::json& j) {
  std::ofstream(p) << j.dump(2);
}

// The golden's two configs as the release lays them out (outer from the golden's record of it).
inline nlohmann::json golden_outer() {
  return read_json(kH3VideoTiny / "config.json").at("config.json (outer wrapper, as loaded)");
}
inline nlohmann::json golden_source() {
  return read_json(kH3VideoTiny / "config.json").at("source/config.json (tiny)");
}

// Random float32 weights for every tensor the decoder reads at `source`'s sizes (the golden's
// rules: linear N(0,1)/sqrt(fan_in), biases 0.05 N, norm weights 1 + 0.1 N, LayerScale 0.1).
inline TensorMap random_weights(const nlohmann::json& source, uint32_t seed) {
  const auto& v = source.at("vit_decoder_kwargs");
  const int64_t Z = source.at("z_channels"), D = int64_t(v.at("heads")) * int64_t(v.at("dim_head"));
  const int64_t L = v.at("num_layers"), F = 3 * 4 * 16 * 16;
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  TensorMap m;
  auto make = [&](const std::string& name, Shape shape, float scale, float offset) {
    Tensor t = Tensor::empty(std::move(shape), DType::F32);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = offset + scale * n(rng);
    m[name] = t;
  };
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    make(name + ".weight", {out, in}, 1.f / std::sqrt(float(in)), 0.f);
    make(name + ".bias", {out}, 0.05f, 0.f);
  };
  make("post_quant_conv.weight", {Z, Z, 1, 1, 1}, 1.f / std::sqrt(float(Z)), 0.f);
  make("post_quant_conv.bias", {Z}, 0.05f, 0.f);
  linear("decoder.x_embedder", D, Z);
  make("decoder.register_tokens", {1, 4, D}, 0.5f, 0.f);
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "decoder.transformer_blocks." + std::to_string(i) + ".";
    make(p + "norm1.weight", {D}, 0.1f, 1.f);
    make(p + "norm2.weight", {D}, 0.1f, 1.f);
    linear(p + "attn.to_qkv", 3 * D, D);
    linear(p + "attn.to_out", D, D);
    linear(p + "ff.w1", 8 * D, D);
    linear(p + "ff.w2", D, 4 * D);
    make(p + "scale1", {D}, 0.01f, 0.1f);
    make(p + "scale2", {D}, 0.01f, 0.1f);
  }
  make("decoder.norm_out.weight", {D}, 0.1f, 1.f);
  make("decoder.norm_out.bias", {D}, 0.05f, 0.f);
  linear("decoder.proj_out", F, D);
  return m;
}

}  // namespace avdit::testing
