// Byte-level BPE: the vocabulary, the merge ranks and the merge loop of HF tokenizers' BPE model,
// with a cache of words already seen (prompts repeat words a lot).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace avdit::models::text {

class Bpe {
 public:
  struct Token {
    int32_t id;
    uint32_t begin, end;  // bytes of the word this token spells
  };

  // vocab: byte-level token (UTF-8) -> id; merges: the pairs in rank order. `source` names the
  // files in error messages. Every merge must join two vocabulary tokens into a third.
  Bpe(std::unordered_map<std::string, int32_t> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, std::string_view source);

  // Appends the tokens of one pre-token, given as raw bytes. Bytes missing from the vocabulary are
  // dropped (the reference has no unknown token); every byte is in Qwen's.
  void encode_word(std::string_view bytes, std::vector<Token>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The byte-level token of an id, or nullptr when the id is not in the vocabulary.
  const std::string* id_to_token(int32_t id) const;
  // One past the largest id.
  int32_t id_end() const { return static_cast<int32_t>(tokens_.size()); }
  size_t vocab_size() const { return vocab_.size(); }
  size_t merge_count() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_word(std::string_view bytes, std::vector<Token>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;  // by id; empty where an id is unused
  int32_t byte_ids_[256];            // the token of each single byte, -1 if absent
  std::unordered_map<uint64_t, Merge> merges_;

  // Words up to kCachedWordBytes long, with their tokens; cleared when it holds kCacheEntries.
  static constexpr size_t kCachedWordBytes = 256, kCacheEntries = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<Token>> cache_;
};

}  // namespace avdit::models::text
