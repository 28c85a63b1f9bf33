// The Qwen pre-tokenizer regexes as a direct matcher. At each position the alternatives are tried
// in order and the first that matches wins (Oniguruma's leftmost, first-alternative semantics);
// each alternative below says what its backtracking reduces to. Every code point is matched by one
// of them, so the "isolated" split is just the sequence of matches.
#include "models/text/pre_tokenizer.h"

#include "models/text/unicode.h"

namespace avdit::models::text {

namespace {

bool is_newline(char32_t c) { return c == '\r' || c == '\n'; }

// Simple case folding for the contraction letters; U+017F (long s) folds to 's' in Oniguruma.
char32_t fold(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + ('a' - 'A');
  if (c == 0x17F) return 's';
  return c;
}

// The end of the match starting at p (p < text.size()).
size_t match_at(std::u32string_view t, size_t p, bool marks_join_letters) {
  const size_t n = t.size();
  const auto letter = [&](char32_t c) {
    return is_letter(c) || (marks_join_letters && is_mark(c));
  };
  const char32_t c = t[p];

  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (c == '\'' && p + 1 < n) {
    const char32_t a = fold(t[p + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return p + 2;
    if (p + 2 < n) {
      const char32_t b = fold(t[p + 2]);
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return p + 3;
    }
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+  (kQwen35: [\p{L}\p{M}]+). The optional prefix is taken when a
  // letter follows it; otherwise the run must start at p. A mark may be the prefix in both.
  {
    size_t q = n;
    if (!is_newline(c) && !is_letter(c) && !is_number(c) && p + 1 < n && letter(t[p + 1])) {
      q = p + 1;
    } else if (letter(c)) {
      q = p;
    }
    if (q != n) {
      while (q < n && letter(t[q])) ++q;
      return q;
    }
  }
  // \p{N}: one digit at a time.
  if (is_number(c)) return p + 1;
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*` (kQwen35: [^\s\p{L}\p{M}\p{N}]): an optional space, a run of
  // symbols/punctuation, then any newlines.
  {
    const auto symbol = [&](char32_t x) {
      return !is_regex_space(x) && !is_letter(x) && !is_number(x) &&
             !(marks_join_letters && is_mark(x));
    };
    size_t q = (c == ' ' && p + 1 < n && symbol(t[p + 1])) ? p + 1 : p;
    if (symbol(t[q])) {
      while (q < n && symbol(t[q])) ++q;
      while (q < n && is_newline(t[q])) ++q;
      return q;
    }
  }
  if (is_regex_space(c)) {
    size_t w = p;
    while (w < n && is_regex_space(t[w])) ++w;
    // \s*[\r\n]+: the greedy \s* gives back until a newline can follow, so the match ends just
    // after the last newline of the whitespace run.
    for (size_t k = w; k > p; --k)
      if (is_newline(t[k - 1])) return k;
    // \s+(?!\S): the whole run at the end of the text, else the run less its last code point
    // (which then leads the next piece, e.g. " word").
    if (w == n) return w;
    if (w - p >= 2) return w - 1;
    // \s+
    return w;
  }
  return p + 1;  // not reached: every code point is a letter, number, space or symbol
}

}  // namespace

void split_qwen(std::u32string_view text, SplitPattern pattern, uint32_t base,
                std::vector<Span>& out) {
  const bool marks = pattern == SplitPattern::kQwen35;
  for (size_t p = 0; p < text.size();) {
    const size_t e = match_at(text, p, marks);
    out.push_back({base + static_cast<uint32_t>(p), base + static_cast<uint32_t>(e)});
    p = e;
  }
}

bool in_magi2_cjk_class(char32_t c) {
  return (c >= 0x30 && c <= 0x55) || (c >= 0x1100 && c <= 0x11FF) || (c >= 0x2E80 && c <= 0xA4CF) ||
         (c >= 0xA840 && c <= 0xD7AF) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF65 && c <= 0xFFDC);
}

void split_magi2_cjk(std::u32string_view text, uint32_t base, std::vector<Span>& out) {
  size_t gap = 0;  // start of the current run of unmatched code points
  for (size_t i = 0; i < text.size(); ++i) {
    if (!in_magi2_cjk_class(text[i])) continue;
    if (gap < i)
      out.push_back({base + static_cast<uint32_t>(gap), base + static_cast<uint32_t>(i)});
    out.push_back({base + static_cast<uint32_t>(i), base + static_cast<uint32_t>(i + 1)});
    gap = i + 1;
  }
  if (gap < text.size())
    out.push_back({base + static_cast<uint32_t>(gap), base + static_cast<uint32_t>(text.size())});
}

}  // namespace avdit::models::text
