// Checks `avdit generate` and `avdit forward` make before any work: the files a checkpoint was read
// from (which no output may replace), numeric options, the --seed string, and a lower bound of the
// host memory a generate run needs, compared with what the machine has.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"

namespace avdit::app {

// Every file of the checkpoint: its shards, the index or file it was opened from, config.json.
std::vector<std::filesystem::path> checkpoint_files(const Checkpoint& ckpt);

// A decimal integer from an option's list ("--rows 512,1024"); BadInput naming `what` otherwise
// (std::stoll's bare "stoll" error would name nothing).
int64_t parse_int64(std::string_view text, std::string_view what);

// A CLI11 validator for unsigned 64-bit options: refuses values beyond 2^64 - 1 and negative ones,
// which CLI11 would otherwise clamp or wrap.
CLI::Validator uint64_string();

struct GenerateSize {
  Shape video, audio;       // latent shapes (unpacked)
  int64_t text_tokens = 0;  // rows of the text states
  int steps = 0;
  bool trajectory = false;  // recorded (--save-trajectory or --teacher)
  bool model_out = false;   // --save-model-out
  bool cpu_forward = true;  // the model runs on the host (--device cpu)
};

// BadInput when a lower bound of the run's host memory (latents, trajectory, one forward's
// activations on the CPU) exceeds /proc/meminfo's MemAvailable; the message gives both figures.
void check_generate_memory(const std::string& family, const nlohmann::json& config,
                           const GenerateSize& size);
// The same for one forward on fixture-format inputs (video_latent, audio_latent, text states).
void check_forward_memory(const std::string& family, const nlohmann::json& config,
                          const TensorMap& inputs, bool cpu_forward);

}  // namespace avdit::app
