// The BPE merge loop as HF tokenizers runs it: all adjacent pairs that have a merge go into a
// min-heap ordered by (rank, position); the top is applied unless it went stale (the pair at its
// position no longer merges into the same token), and the pairs it creates with its neighbours are
// pushed. Applying merges one at a time this way gives the same tokens as the reference on every
// word, including ties between overlapping pairs ("aaa").
#include "models/text/bpe.h"

#include <fmt/format.h>

#include <queue>

#include "core/error.h"
#include "models/text/byte_level.h"
#include "models/text/unicode.h"

namespace avdit::models::text {

Bpe::Bpe(std::unordered_map<std::string, int32_t> vocab,
         const std::vector<std::pair<std::string, std::string>>& merges, std::string_view source)
    : vocab_(std::move(vocab)) {
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab_) {
    AVDIT_REQUIRE(id >= 0, "{}: token '{}' has the negative id {}", source, token, id);
    max_id = std::max(max_id, id);
  }
  tokens_.resize(static_cast<size_t>(max_id + 1));
  for (const auto& [token, id] : vocab_) tokens_[id] = token;
  for (int b = 0; b < 256; ++b) {
    std::string t;
    append_utf8(t, byte_to_char(static_cast<unsigned char>(b)));
    auto it = vocab_.find(t);
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  merges_.reserve(merges.size());
  std::string ab;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    ab.assign(a).append(b);
    const auto ia = vocab_.find(a), ib = vocab_.find(b), iab = vocab_.find(ab);
    AVDIT_REQUIRE(ia != vocab_.end() && ib != vocab_.end() && iab != vocab_.end(),
                  "{}: merge {} ('{} {}') involves '{}', which is not in the vocabulary; the "
                  "vocabulary and the merges do not belong together",
                  source, rank + 1, a, b,
                  ia == vocab_.end()   ? a
                  : ib == vocab_.end() ? b
                                       : ab);
    // A repeated pair takes its last rank, as the reference's hash map does.
    merges_.insert_or_assign(pair_key(ia->second, ib->second),
                             Merge{static_cast<int32_t>(rank), iab->second});
  }
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_end() || tokens_[id].empty()) return nullptr;
  return &tokens_[id];
}

void Bpe::merge_word(std::string_view bytes, std::vector<Token>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
    uint32_t begin, len;
  };
  std::vector<Symbol> sym;
  sym.reserve(bytes.size());
  for (uint32_t i = 0; i < bytes.size(); ++i) {
    const int32_t id = byte_ids_[static_cast<unsigned char>(bytes[i])];
    if (id < 0) continue;
    const int32_t k = static_cast<int32_t>(sym.size());
    sym.push_back({id, k - 1, -1, i, 1});
    if (k > 0) sym[k - 1].next = k;
  }
  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto push = [&](int32_t pos) {
    const int32_t next = sym[pos].next;
    if (next < 0) return;
    auto it = merges_.find(pair_key(sym[pos].id, sym[next].id));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& s = sym[top.pos];
    if (s.len == 0 || s.next < 0) continue;
    Symbol& right = sym[s.next];
    auto it = merges_.find(pair_key(s.id, right.id));
    if (it == merges_.end() || it->second.id != top.id) continue;  // stale
    s.id = top.id;
    s.len += right.len;
    right.len = 0;
    s.next = right.next;
    if (s.next >= 0) sym[s.next].prev = top.pos;
    if (s.prev >= 0) push(s.prev);
    push(top.pos);
  }
  for (const Symbol& s : sym)
    if (s.len > 0) out.push_back({s.id, s.begin, s.begin + s.len});
}

void Bpe::encode_word(std::string_view bytes, std::vector<Token>& out) const {
  if (bytes.size() > kCachedWordBytes) {
    merge_word(bytes, out);
    return;
  }
  std::string key(bytes);
  {
    std::lock_guard lock(cache_mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(bytes, out);
  std::lock_guard lock(cache_mutex_);
  if (cache_.size() >= kCacheEntries) cache_.clear();
  cache_.emplace(std::move(key), std::vector<Token>(out.begin() + first, out.end()));
}

}  // namespace avdit::models::text
