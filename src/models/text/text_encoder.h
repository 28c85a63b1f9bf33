// A text encoder as the pipelines use it: token ids in, the hidden state the DiT consumes out.
// Two families implement it (MiniMax-H3: the Qwen3-VL text path, the raw residual after layer 49;
// MAGI-2: the Qwen3.5 hybrid, hidden_states[-3]); each is one definition on the op set, so the same
// object runs on the CPU or the GPU context it was opened on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace avdit::ops {
class Context;
}

namespace avdit::models::text {

class TextEncoder {
 public:
  virtual ~TextEncoder() = default;
  // What runs, for messages and cache keys ("qwen3_vl text path, 50 of 64 layers").
  virtual std::string describe() const = 0;
  virtual int64_t hidden_size() const = 0;
  // ids: T >= 1 token ids of one prompt (batch 1, attention mask all ones, positions 0..T-1).
  // Returns the consumed state, F32 [T, hidden] on the host.
  virtual Tensor encode(const std::vector<int32_t>& ids) const = 0;
};

struct TextEncoderOptions {
  // Decoder layers to run, 0: the pipeline's constant (H3: 50). Fixtures of tiny models set it.
  int selected_layers = 0;
  DType act = DType::F32;  // activations: F32 (parity) or BF16 (the pipelines' precision)
  // Random weights of the folder's config made on the context (memory and speed runs without the
  // checkpoint, `generate --random-weights`): only config.json is read.
  std::optional<uint64_t> random_seed;
};

// The family of a text encoder folder: its config.json's model_type, "qwen3_vl" or "qwen3_5"
// (BadInput otherwise, or without config.json).
std::string text_encoder_family(const std::filesystem::path& dir);

// The encoder of a text encoder folder, by its config.json's model_type ("qwen3_vl": MiniMax-H3;
// "qwen3_5": MAGI-2). BadInput for a folder without config.json or another model_type.
std::unique_ptr<TextEncoder> open_text_encoder(ops::Context& ctx, const std::filesystem::path& dir,
                                               const TextEncoderOptions& options = {});

}  // namespace avdit::models::text
