// Added tokens (<|im_start|>, <|image_pad|>, H3's <d> ...): whole strings with their own ids that
// the reference cuts out of the raw text before normalising and splitting the rest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace avdit::models::text {

struct AddedToken {
  std::string content;  // UTF-8
  int32_t id;
  bool special;
};

class AddedTokens {
 public:
  AddedTokens() = default;
  explicit AddedTokens(std::vector<AddedToken> tokens);

  struct Match {
    uint32_t begin, end;  // code points of the text
    int32_t id;
  };
  // Leftmost-longest matches, as the reference's Aho-Corasick split (MatchKind::LeftmostLongest):
  // scanning left to right, at the first position where a token starts the longest one is taken.
  std::vector<Match> find(std::u32string_view text) const;

  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(std::string_view content) const;
  const std::vector<AddedToken>& all() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::u32string> text_;                                 // tokens_[i] as code points
  std::unordered_map<char32_t, std::vector<size_t>> by_first_char_;  // longest first
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
};

}  // namespace avdit::models::text
