// Matching added tokens in raw text.
#include "models/text/added_tokens.h"

#include <algorithm>

#include "models/text/unicode.h"

namespace avdit::models::text {

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    std::u32string t;
    decode_utf8(tokens_[i].content, t);
    text_.push_back(t);
    if (!t.empty()) by_first_char_[t[0]].push_back(i);
    by_id_[tokens_[i].id] = i;
    by_content_[tokens_[i].content] = i;
  }
  for (auto& [c, list] : by_first_char_)
    std::stable_sort(list.begin(), list.end(),
                     [&](size_t a, size_t b) { return text_[a].size() > text_[b].size(); });
}

std::vector<AddedTokens::Match> AddedTokens::find(std::u32string_view text) const {
  std::vector<Match> out;
  if (tokens_.empty()) return out;
  for (size_t p = 0; p < text.size();) {
    auto it = by_first_char_.find(text[p]);
    bool matched = false;
    if (it != by_first_char_.end()) {
      for (size_t i : it->second) {
        if (text.substr(p, text_[i].size()) == text_[i]) {
          out.push_back({static_cast<uint32_t>(p), static_cast<uint32_t>(p + text_[i].size()),
                         tokens_[i].id});
          p += text_[i].size();
          matched = true;
          break;
        }
      }
    }
    if (!matched) ++p;
  }
  return out;
}

const AddedToken* AddedTokens::by_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedTokens::by_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace avdit::models::text
