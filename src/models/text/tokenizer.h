// The Qwen tokenizer of both pipelines' text encoders: byte-level BPE with the behaviour of the
// HF tokenizers engine the references run (added tokens cut out first, NFC, the Qwen split regex,
// byte-level BPE; offsets in code points of the text given; decode).
//
//   auto tok = Tokenizer::load("…/text_encoder", Pipeline::kH3);
//   Encoding e = tok.encode("A red fox in snow");   // e.ids = {32, 2518, 38835, 304, 11794}
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/text/added_tokens.h"
#include "models/text/bpe.h"
#include "models/text/pre_tokenizer.h"

namespace avdit::models::text {

// Which pipeline's tokenizer to build from a folder.
//   kH3:    Qwen3-VL's Qwen2Tokenizer as transformers assembles it: the Qwen2 regex, and H3's extra
//           special tokens (<d>, </d>, <|cutoff|>, ...: in additional_special_tokens only) added
//           with the next free ids (151669...).
//   kMagi2: Qwen3.5's tokenizer: the Qwen3.5 regex (marks join letters) behind MAGI-2's CJK split
//           (Qwen35TextEncoder.__init__). From a vocab.json + merges.txt folder (the Qwen3-VL files
//           as a stand-in: the real Qwen3.5 folder ships a tokenizer.json) only the config's
//           added_tokens_decoder entries are added tokens, as in the golden stand-in.
// A tokenizer.json's own regex takes precedence over the pipeline's default.
enum class Pipeline { kH3, kMagi2 };

struct Encoding {
  std::vector<int32_t> ids;
  std::vector<std::string> tokens;  // byte-level token strings (UTF-8), added tokens verbatim
  // [start, end) in code points of the text given, including the leading space of "Ġ" tokens;
  // a token holding only part of a character's bytes covers that whole character.
  std::vector<std::pair<int64_t, int64_t>> offsets;
};

struct PreToken {
  std::string piece;   // byte-level (UTF-8)
  int64_t start, end;  // code points of the NFC-normalised text
};

class Tokenizer {
 public:
  // Reads `dir` (tokenizer.json, or vocab.json + merges.txt + tokenizer_config.json).
  static Tokenizer load(const std::filesystem::path& dir, Pipeline pipeline);

  // `text` must be UTF-8 (BadInput naming `what` otherwise). No special tokens are added: neither
  // pipeline adds any (their post-processors are empty templates).
  Encoding encode(std::string_view text, std::string_view what = "the text") const;
  Encoding encode(std::u32string_view text) const;
  std::vector<int32_t> encode_ids(std::string_view text, std::string_view what = "the text") const;

  // decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False): the tokens' bytes,
  // invalid UTF-8 replaced by U+FFFD. Ids that are in neither vocabulary are skipped.
  std::string decode(std::span<const int32_t> ids) const;

  // What the pre-tokenizer makes of `text` (normaliser and splits, before BPE); nullopt when the
  // text holds an added token (those pieces are split separately).
  std::optional<std::vector<PreToken>> pre_tokenize(std::u32string_view text) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // Vocabulary plus added tokens (transformers' len(tokenizer)).
  size_t size() const;
  Pipeline pipeline() const { return pipeline_; }
  SplitPattern split_pattern() const { return pattern_; }
  const AddedTokens& added_tokens() const { return added_; }

 private:
  Tokenizer(Pipeline pipeline, SplitPattern pattern, bool ignore_merges, std::unique_ptr<Bpe> bpe,
            AddedTokens added)
      : pipeline_(pipeline),
        pattern_(pattern),
        ignore_merges_(ignore_merges),
        bpe_(std::move(bpe)),
        added_(std::move(added)) {}

  std::vector<Span> split(std::u32string_view normalized) const;
  void encode_segment(std::u32string_view text, uint32_t base, Encoding& out) const;

  Pipeline pipeline_;
  SplitPattern pattern_;
  bool ignore_merges_;
  std::unique_ptr<Bpe> bpe_;
  AddedTokens added_;
};

}  // namespace avdit::models::text
