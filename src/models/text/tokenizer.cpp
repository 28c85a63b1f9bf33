// Tokenizer: the reference's encode, step by step, on code points. The added tokens split the raw
// text; each piece between them is normalised (NFC, with alignments back to the raw text), split by
// the pre-tokenizer and each split's UTF-8 bytes run through BPE.
#include "models/text/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "models/text/byte_level.h"
#include "models/text/nfc.h"
#include "models/text/tokenizer_files.h"
#include "models/text/unicode.h"

namespace avdit::models::text {

Tokenizer Tokenizer::load(const std::filesystem::path& dir, Pipeline pipeline) {
  TokenizerFiles files = read_tokenizer_files(dir);
  const SplitPattern pattern = files.pattern.value_or(
      pipeline == Pipeline::kH3 ? SplitPattern::kQwen2 : SplitPattern::kQwen35);
  auto bpe = std::make_unique<Bpe>(std::move(files.vocab), files.merges, files.source);
  std::vector<AddedToken> added = std::move(files.added);
  if (pipeline == Pipeline::kH3) {
    // transformers adds every additional special token that is not an added token yet: with its
    // vocabulary id when it has one, else with the next free id, in the config's order.
    int32_t next = bpe->id_end();
    for (const AddedToken& t : added) next = std::max(next, t.id + 1);
    for (const std::string& s : files.additional_special) {
      if (std::any_of(added.begin(), added.end(),
                      [&](const AddedToken& t) { return t.content == s; }))
        continue;
      const std::optional<int32_t> in_vocab = bpe->token_to_id(s);
      added.push_back({s, in_vocab ? *in_vocab : next++, true});
    }
  }
  for (const AddedToken& t : added) {
    std::u32string chars;
    AVDIT_REQUIRE(decode_utf8(t.content, chars), "{}: added token {} is not valid UTF-8",
                  files.source, t.id);
  }
  return Tokenizer(pipeline, pattern, files.ignore_merges, std::move(bpe),
                   AddedTokens(std::move(added)));
}

std::vector<Span> Tokenizer::split(std::u32string_view normalized) const {
  std::vector<Span> spans;
  if (pipeline_ == Pipeline::kMagi2) {
    std::vector<Span> cjk;
    split_magi2_cjk(normalized, 0, cjk);
    for (const Span& s : cjk)
      split_qwen(normalized.substr(s.begin, s.end - s.begin), pattern_, s.begin, spans);
  } else {
    split_qwen(normalized, pattern_, 0, spans);
  }
  return spans;
}

void Tokenizer::encode_segment(std::u32string_view text, uint32_t base, Encoding& out) const {
  const NfcText norm = nfc(text);
  std::string bytes;
  std::vector<uint32_t> byte_to_cp;  // code point (of norm.text) of each byte of `bytes`
  std::vector<Bpe::Token> tokens;
  for (const Span& span : split(norm.text)) {
    bytes.clear();
    byte_to_cp.clear();
    for (uint32_t i = span.begin; i < span.end; ++i) {
      const size_t before = bytes.size();
      append_utf8(bytes, norm.text[i]);
      byte_to_cp.insert(byte_to_cp.end(), bytes.size() - before, i);
    }
    tokens.clear();
    std::optional<int32_t> whole;
    if (ignore_merges_) whole = bpe_->token_to_id(to_byte_level(bytes));
    if (whole) {
      tokens.push_back({*whole, 0, static_cast<uint32_t>(bytes.size())});
    } else {
      bpe_->encode_word(bytes, tokens);
    }
    for (const Bpe::Token& t : tokens) {
      out.ids.push_back(t.id);
      out.tokens.push_back(*bpe_->id_to_token(t.id));
      const auto& first = norm.align[byte_to_cp[t.begin]];
      const auto& last = norm.align[byte_to_cp[t.end - 1]];
      out.offsets.emplace_back(base + first.first, base + last.second);
    }
  }
}

Encoding Tokenizer::encode(std::u32string_view text) const {
  for (char32_t c : text)
    AVDIT_REQUIRE(c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF),
                  "the text holds U+{:04X}, which is not a Unicode scalar value", uint32_t(c));
  Encoding out;
  out.ids.reserve(text.size() / 3 + 8);
  uint32_t p = 0;
  for (const AddedTokens::Match& m : added_.find(text)) {
    if (p < m.begin) encode_segment(text.substr(p, m.begin - p), p, out);
    out.ids.push_back(m.id);
    out.tokens.push_back(added_.by_id(m.id)->content);
    out.offsets.emplace_back(m.begin, m.end);
    p = m.end;
  }
  if (p < text.size()) encode_segment(text.substr(p), p, out);
  return out;
}

Encoding Tokenizer::encode(std::string_view text, std::string_view what) const {
  return encode(utf8_to_u32(text, what));
}

std::vector<int32_t> Tokenizer::encode_ids(std::string_view text, std::string_view what) const {
  return encode(text, what).ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (const AddedToken* a = added_.by_id(id)) {
      append_token_bytes(bytes, a->content);
    } else if (const std::string* t = bpe_->id_to_token(id)) {
      append_token_bytes(bytes, *t);
    }
  }
  return utf8_lossy(bytes);
}

std::optional<std::vector<PreToken>> Tokenizer::pre_tokenize(std::u32string_view text) const {
  if (!added_.find(text).empty()) return std::nullopt;
  const NfcText norm = nfc(text);
  std::vector<PreToken> out;
  for (const Span& s : split(norm.text)) {
    const std::string piece =
        u32_to_utf8(std::u32string_view(norm.text).substr(s.begin, s.end - s.begin));
    out.push_back({to_byte_level(piece), s.begin, s.end});
  }
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* a = added_.by_content(token)) return a->id;
  return bpe_->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* a = added_.by_id(id)) return a->content;
  if (const std::string* t = bpe_->id_to_token(id)) return *t;
  return std::nullopt;
}

size_t Tokenizer::size() const {
  size_t n = bpe_->vocab_size();
  for (const AddedToken& t : added_.all())
    if (!bpe_->id_to_token(t.id)) ++n;
  return n;
}

}  // namespace avdit::models::text
