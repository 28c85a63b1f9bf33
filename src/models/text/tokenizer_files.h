// Reading a Qwen tokenizer folder: either a tokenizer.json (what a Qwen3.5 folder ships), or the
// vocab.json + merges.txt + tokenizer_config.json triple that transformers assembles into one
// (what MiniMax-H3's text_encoder folder holds).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "models/text/added_tokens.h"
#include "models/text/pre_tokenizer.h"

namespace avdit::models::text {

struct TokenizerFiles {
  std::unordered_map<std::string, int32_t> vocab;           // byte-level token -> id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<AddedToken> added;  // tokenizer.json added_tokens / config added_tokens_decoder
  // tokenizer_config.json additional_special_tokens, in order (some are not in `added`).
  std::vector<std::string> additional_special;
  std::optional<SplitPattern> pattern;  // the Split regex of a tokenizer.json
  bool ignore_merges = false;           // tokenizer.json BPE option: whole-word vocabulary hits
  std::string source;                   // the files read, for messages
};

// Reads `dir`. Missing or malformed files, and tokenizer.json features this implementation does
// not have (another regex, normaliser or model), are BadInput naming the file.
TokenizerFiles read_tokenizer_files(const std::filesystem::path& dir);

}  // namespace avdit::models::text
