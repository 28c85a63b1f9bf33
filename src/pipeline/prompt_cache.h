// The prompt-state cache: a pipeline's text states are a constant of (text encoder, token ids,
// precision), and encoding them means reading a 27-32B model, so a warm run reads a few MB from
// disk instead. Entries are safetensors named by the SHA-256 of what determines them; a miss, a
// damaged entry or an unwritable folder only costs the encoding (with a warning), never the run.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "pipeline/prompt_states.h"

namespace avdit::pipeline {

// The cache folder of a run: `dir` when given, else $XDG_CACHE_HOME/avdit or ~/.cache/avdit (the
// parent of the captions' default folder); nullopt with `off` or when neither variable is set.
std::optional<std::filesystem::path> cache_root(const std::string& dir, bool off);

// What identifies a model folder (a text encoder, a DiT) without reading its weights: config.json's
// bytes and, per *.safetensors file, its name, size, modification time and header.
std::string folder_identity(const std::filesystem::path& dir);

// What besides the ids and the encoder determines the states: the activation dtype, the device
// (CPU and GPU states differ in the last bits) and, when not the pipeline's, the layers run and the
// output dtype. `avdit encode` with the defaults and `generate --prompt` share entries.
std::string prompt_state_settings(DType act, bool cuda, int layers = 0, bool bf16_states = true);

// The cache key of the states of `ids` under an encoder identity and the run's settings.
std::string prompt_state_key(const std::string& folder_identity, const PromptIds& ids,
                             const std::string& settings);

// DIR/prompts/KEY.safetensors when present and readable; nullopt on a miss (a damaged entry is
// reported and ignored).
std::optional<NamedTensors> load_prompt_states(const std::filesystem::path& dir,
                                               const std::string& key);
// Writes the entry atomically (temporary name, then rename); a failure is a warning.
void store_prompt_states(const std::filesystem::path& dir, const std::string& key,
                         const NamedTensors& states);

}  // namespace avdit::pipeline
