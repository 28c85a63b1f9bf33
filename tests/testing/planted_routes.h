// A MAGI-2 checkpoint whose routing is known by construction (router statistics tests): the golden
// tiny model (2 MoE layers, blocks 2 and 3, 2 heads of 16 experts, top 3) with
//  - each modality's embedder bias +1e4 on its own residual channel (100 + m in every stream), so
//    that channel dominates the stream of that modality's tokens up to the MoE layers;
//  - each MoE layer's pre_norm 1 on those channels, split_linear mapping channel 100 + m to column
//    m of every head, and router gate column m = 0.255 for 4 designated experts of modality m (zero
//    for every other expert): a token of modality m scores sigmoid(~2.9) ~ 0.947 on its 4 and
//    ~0.5 elsewhere;
//  - router bias 0, except -10 on the 4th designated expert of each modality (unreachable).
// So every token of modality m picks exactly chosen[l][h][m] (3 experts), the 4 undesignated and
// the 3 bias-killed experts of a head are never picked, and every K-th vs (K+1)-th gap is ~0.447,
// in the histogram bin [10^-0.4, 10^-0.3) (index kPlantedGapBin).
#pragma once

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "analysis/routes/recorder.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "models/magi2/model.h"
#include "pipeline/generate_magi2.h"

namespace avdit::testing {

inline constexpr int kPlantedGapBin = 57;  // edges 0 .. 56 (10^-6 .. 10^-0.4) are <= the gap

struct PlantedRoutes {
  std::filesystem::path dir;
  std::vector<int64_t> layers = {2, 3};
  int64_t heads = 2, experts = 16, top_k = 3;
  // chosen[l][h][m]: the experts modality m picks at MoE layer l (ordinal) and head h, ascending;
  // killed[l][h][m]: its designated expert that the bias makes unreachable.
  std::vector<std::vector<std::array<std::vector<int64_t>, 3>>> chosen;
  std::vector<std::vector<std::array<int64_t, 3>>> killed;
  // Never picked: (block, head, expert), ascending.
  std::vector<std::array<int64_t, 3>> dead;
};

inline PlantedRoutes write_planted_routes(const std::filesystem::path& golden,
                                          const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  PlantedRoutes p;
  p.dir = dir;
  fs::create_directories(dir);
  fs::copy_file(golden / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  TensorMap t = read_all(golden / "model.safetensors");
  auto f32 = [&](const std::string& name) { return t.at(name).to(DType::F32); };
  constexpr int64_t kHidden = 128, kStreams = 4, kChannel = 100, kD = 64;
  const char* embedders[3] = {"video", "audio", "text"};
  for (int m = 0; m < 3; ++m) {
    const std::string name = fmt::format("pre_adapter.{}_embedder.bias", embedders[m]);
    Tensor b = f32(name);
    for (int64_t s = 0; s < kStreams; ++s) b.f32()[s * kHidden + kChannel + m] += 1e4f;
    t[name] = b;
  }
  p.chosen.resize(p.layers.size());
  p.killed.resize(p.layers.size());
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const std::string pre = fmt::format("block.layers.{}.mlp.", p.layers[l]);
    Tensor norm = f32(pre + "pre_norm.weight");  // [3, hidden], used as 1 + w
    for (int m = 0; m < 3; ++m)
      for (int c = 0; c < 3; ++c) norm.f32()[m * kHidden + kChannel + c] = 0.f;
    t[pre + "pre_norm.weight"] = norm.to(t.at(pre + "pre_norm.weight").dtype());
    Tensor split = f32(pre + "split_linear.weight");  // [W = heads * D, hidden]
    for (int64_t j = 0; j < p.heads * kD; ++j)
      for (int c = 0; c < 3; ++c) split.f32()[j * kHidden + kChannel + c] = 0.f;
    for (int64_t h = 0; h < p.heads; ++h)
      for (int m = 0; m < 3; ++m) split.f32()[(h * kD + m) * kHidden + kChannel + m] = 1.f;
    t[pre + "split_linear.weight"] = split.to(t.at(pre + "split_linear.weight").dtype());
    Tensor gate = f32(pre + "moe_mlp.gate");  // [heads * E, D]
    Tensor bias = Tensor::zeros({p.heads * p.experts}, DType::F32);
    for (int64_t r = 0; r < p.heads * p.experts; ++r)
      for (int c = 0; c < 3; ++c) gate.f32()[r * kD + c] = 0.f;
    p.chosen[l].resize(p.heads);
    p.killed[l].resize(p.heads);
    for (int64_t h = 0; h < p.heads; ++h) {
      const int64_t offset = 5 * static_cast<int64_t>(l) + 3 * h;
      std::vector<bool> designated(p.experts, false);
      for (int m = 0; m < 3; ++m) {
        for (int j = 0; j < 4; ++j) {
          const int64_t e = (offset + 4 * m + j) % p.experts;
          designated[e] = true;
          gate.f32()[(h * p.experts + e) * kD + m] = 0.255f;
          if (j < 3) p.chosen[l][h][m].push_back(e);
        }
        std::sort(p.chosen[l][h][m].begin(), p.chosen[l][h][m].end());
        p.killed[l][h][m] = (offset + 4 * m + 3) % p.experts;
        bias.f32()[h * p.experts + p.killed[l][h][m]] = -10.f;
      }
      for (int64_t e = 0; e < p.experts; ++e) {
        bool picked = false;
        for (int m = 0; m < 3; ++m)
          for (int64_t c : p.chosen[l][h][m]) picked = picked || c == e;
        if (!picked) p.dead.push_back({p.layers[l], h, e});
      }
    }
    t[pre + "moe_mlp.gate"] = gate;
    t[pre + "moe_mlp.router.expert_bias"] = bias;
    t[pre + "moe_mlp.router.expert_bias_ema"] = bias;
  }
  write_safetensors(dir / "model.safetensors", t);
  return p;
}

struct RoutedRun {
  analysis::routes::RouteStats stats;
  Tensor video;  // final video latent (host)
};

// The magi2-tiny fixture's 4-step CFG run (its txt_feat / null_txt_feat and initial latents) of
// the model in model_dir on ctx, with a RouteRecorder attached.
inline RoutedRun run_with_route_stats(ops::Context& ctx, const std::filesystem::path& model_dir,
                                      const std::filesystem::path& golden, DType act = DType::F32,
                                      bool nvfp4 = false, std::map<int64_t, Tensor> mask = {},
                                      std::vector<analysis::routes::RouteMapPoint> maps = {}) {
  const Checkpoint ckpt = Checkpoint::open(model_dir);
  models::magi2::LoadOptions load;
  load.nvfp4_experts = nvfp4;
  load.router_bias_add = std::move(mask);
  const models::magi2::Magi2Model model(ctx, ckpt, act, load);
  const std::filesystem::path sampler = golden / "sampler.safetensors";
  pipeline::Magi2GenerateOptions o;
  o.text = pipeline::read_one_of(sampler, {"txt_feat"}, "text");
  o.negative = pipeline::read_one_of(sampler, {"null_txt_feat"}, "negative");
  o.run.noise_video = pipeline::read_one_of(sampler, {"init_video_latent"}, "video noise");
  o.run.noise_audio = pipeline::read_one_of(sampler, {"init_audio_latent"}, "audio noise");
  analysis::routes::RouteRecorder recorder(std::move(maps));
  o.route_recorder = &recorder;
  RoutedRun r;
  r.video = pipeline::generate_magi2(model, o).video;
  r.stats = recorder.finish(ctx);
  return r;
}

}  // namespace avdit::testing
