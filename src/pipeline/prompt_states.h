// A prompt turned into the text states a DiT reads, as each pipeline does it: MiniMax-H3 tokenizes
// the prompt verbatim (no template, no special tokens) and hands the encoder's states with their
// text/vision tags; MAGI-2 applies its prompt handling (JSON to markdown, the 7,000-token limit) to
// the prompt and the negative prompt and pads both states to one length. `avdit encode` writes
// these tensors; `avdit generate --prompt` passes them on in memory (or through the cache).
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace avdit::models::text {
class TextEncoder;
}

namespace avdit::pipeline {

// Named tensors in the layout `avdit generate --text / --negative` reads:
// H3: text_embeds [T, hidden] (bf16 when `bf16`), text_token_tags I64 [T];
// MAGI-2: txt_feat [1, L, hidden], txt_len I64 [1] and, with a negative prompt, null_txt_feat,
// null_txt_len (the two states zero-padded to one length L).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Token ids of the prompts, checked (valid UTF-8, at least one token) before any encoder loads.
struct PromptIds {
  bool magi2 = false;
  std::vector<int32_t> prompt, negative;  // negative: MAGI-2 only, empty when not given
  std::vector<uint8_t> tags;              // H3: 1 text row, 0 vision row
  bool has_negative = false;
};

// `family` is the text encoder's model_type ("qwen3_vl": H3, "qwen3_5": MAGI-2). BadInput names
// the option ("--prompt") for invalid UTF-8 or a prompt that gives no tokens; a negative prompt
// for H3 (CFG-distilled, no unconditional text) is BadInput too.
PromptIds tokenize_prompts(const std::filesystem::path& tokenizer_dir, const std::string& family,
                           const std::string& prompt, const std::string& negative,
                           const char* prompt_option = "--prompt",
                           const char* negative_option = "--negative");

// The encoder run on the ids; `bf16` rounds the states to bf16 as the pipelines hand them on.
NamedTensors encode_prompt_states(const models::text::TextEncoder& encoder, const PromptIds& ids,
                                  bool bf16, int64_t* tokens = nullptr);

}  // namespace avdit::pipeline
