// `generate --random-weights`: the pipeline of a folder's configs with random weights, so that
// memory and speed runs at full size need no checkpoint on disk. The text encoder, the DiT and the
// refiner are drawn on their stage's context; the decoders are folders of random weights written
// once from the golden tiny models' names (models/vae/random_decoder.h). Each component has its
// own seed, derived from the run's; caches key random entries by "random:SEED", so a random run
// never reads or fills an entry of real weights.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace avdit::pipeline {

struct RandomWeights {
  uint64_t seed = 0;
  std::filesystem::path shared = AVDIT_SHARED_DIR;  // golden/: the decoders' tensor names
};

// The seed of one component's weights ("text_encoder", "dit", "refiner", "video_vae", ...).
uint64_t component_seed(const RandomWeights& r, std::string_view component);

// What identifies a component's random weights in a cache key: "random:SEED" and its config.json.
std::string random_identity(const std::filesystem::path& dir, uint64_t component_seed);

// A decoder folder of random weights for the decoder folder `dir` (of the size its configs
// describe). Kept under CACHE/random-decoders when a cache folder is given (made once; written
// under a temporary name and renamed), else in a temporary folder removed with this object.
class RandomDecoderFolder {
 public:
  RandomDecoderFolder(const std::filesystem::path& dir, const RandomWeights& random,
                      std::string_view component,
                      const std::optional<std::filesystem::path>& cache_dir);
  ~RandomDecoderFolder();
  RandomDecoderFolder(const RandomDecoderFolder&) = delete;
  RandomDecoderFolder& operator=(const RandomDecoderFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // "random release-size MiniMax-H3 video VAE weights (written in 95.1 s)" or "(cached)"
  const std::string& describe() const { return describe_; }

 private:
  std::filesystem::path path_;
  bool temporary_ = false;
  std::string describe_;
};

}  // namespace avdit::pipeline
