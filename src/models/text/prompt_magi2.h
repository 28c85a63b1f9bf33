// MAGI-2's prompt handling before its tokenizer (SandAI-org/MAGI-2-preview @ f68a0f9:
// inference/model/qwen35.py, inference/pipeline/{entry,inference_engine}.py): prompt files are
// stripped, a JSON prompt becomes compact markdown, an image adds a <Figure 1> reference, and the
// tokens are cut at 7000. Each function names the reference function it reproduces.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/text/tokenizer.h"

namespace avdit::models::text::magi2 {

// Qwen35TextEncoder(max_length=7000): tokenizer(..., max_length=7000, truncation=True) keeps the
// first 7000 tokens.
inline constexpr int64_t kMaxTokens = 7000;

// Python's str.strip() (Unicode whitespace, as str.isspace()).
std::u32string strip(std::u32string_view s);

// entry.py: open(prompt_file).read().strip(). BadInput names the file when it is unreadable or not
// UTF-8.
std::u32string read_prompt_file(const std::filesystem::path& path);

// Qwen35TextEncoder._normalize_prompt: a prompt whose json.loads is a dict or a list goes through
// json_to_compact_markdown, which turns a dict holding "global_layer" (once None, [] and {} values
// are dropped) into one line per filled field; other dicts and lists, and prompts on which it
// raises TypeError (a number where it iterates), come back unchanged, as does every other prompt.
// BadInput where the reference fails instead (JSON nested too deep, an int over 4300 digits).
std::u32string normalize_prompt(std::u32string_view prompt);

// Magi2InferenceEngine._ensure_figure_tokens (an image conditions the generation): a JSON object
// prompt gets "reference_layer": ["The first frame refers to <Figure 1>"] and is re-dumped
// (json.dumps, ensure_ascii=False); any other prompt gets
// "reference_layer:The first frame refers to <Figure 1>" appended with no separator.
std::u32string ensure_figure_tokens(std::u32string_view prompt);

struct PromptEncoding {
  std::u32string normalized;  // the text the tokenizer saw
  Encoding encoding;          // at most kMaxTokens tokens
  int64_t untruncated_tokens = 0;
  bool truncated() const { return untruncated_tokens > kMaxTokens; }
};

// Qwen35TextEncoder.encode's tokenization: normalize_prompt, then tokenizer([prompt],
// padding="longest", max_length=7000, truncation=True) for one prompt (no padding, no special
// tokens). BadInput when the normalised prompt holds a lone surrogate (from a JSON \ud800 escape),
// which the reference tokenizer cannot encode either.
PromptEncoding encode_prompt(const Tokenizer& tokenizer, std::u32string_view prompt);

// Qwen35TextEncoder.get_target_token_indices: the tokens whose offsets overlap the first
// occurrence of `target` in the normalised prompt (tokens with offsets (0, 0) other than the first
// are skipped); nullopt when `target` does not occur. The image's special embedding is the mean
// of the text states at these tokens.
std::optional<std::vector<int64_t>> target_token_indices(const PromptEncoding& prompt,
                                                         std::u32string_view target);

}  // namespace avdit::models::text::magi2
