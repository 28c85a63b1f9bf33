// Teacher trajectories of `avdit score teacher`, kept in --teacher-dir under a key of everything
// that determines them (the model's fingerprint, the prompt's states, seed, steps, shapes,
// guidance, shift, device, precision), with the key in the file's metadata: a trajectory is reused
// only for the run it belongs to, and one of another model or step count is refused by name.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>

#include "io/safetensors.h"
#include "sample/sampler_loop.h"
#include "score/run.h"

namespace avdit::score {

// What identifies a DiT checkpoint without reading all of it: config.json's bytes and, per
// safetensors file (by name), its size, its first MiB (the header) and 16 spans of 64 KiB spread
// over the rest; so two random checkpoints of one config differ, as do a checkpoint and its NVFP4
// packing, while a 200 GB checkpoint costs a few MB of reads. SHA-256, hex.
std::string model_fingerprint(const Checkpoint& ckpt);

// The key of one prompt's teacher run.
nlohmann::json teacher_key(const std::string& fingerprint, const std::string& family,
                           const Prompt& prompt, const Sampling& s);

// DIR/teacher-<24 hex of SHA-256(key)>.safetensors.
std::filesystem::path teacher_path(const std::filesystem::path& dir, const nlohmann::json& key);

// A teacher trajectory file checked against the key: BadInput naming the file and each field that
// differs (model, steps, ...), or saying that it is not a teacher file of avdit score.
sample::Trajectory read_teacher(const std::filesystem::path& file, const nlohmann::json& key);

// Writes the trajectory with its key (atomically).
void write_teacher(const std::filesystem::path& file, const nlohmann::json& key,
                   const sample::Trajectory& t);

}  // namespace avdit::score
