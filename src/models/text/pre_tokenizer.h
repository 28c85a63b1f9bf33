// The Qwen pre-tokenizer: the split of normalised text into the pieces BPE runs on, by a
// hand-written matcher for exactly the two Qwen regexes (not a regex engine), plus the CJK split
// that MAGI-2's text encoder puts in front, with the reference engine's reading of its pattern.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace avdit::models::text {

// The Split regexes (behaviour "isolated") of the two tokenizer definitions:
//   kQwen2  (Qwen2 / Qwen3 / Qwen3-VL, MiniMax-H3):
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//     \s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen35 (Qwen3.5, MAGI-2): the same with combining marks joined to letters:
//     ...|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|...
enum class SplitPattern { kQwen2, kQwen35 };

struct Span {
  uint32_t begin, end;  // [begin, end) in code points
};

// Appends to `out` the pieces of `text` (one piece of an earlier split: its ends act as the ends of
// the string for the lookahead), with offsets shifted by `base`.
void split_qwen(std::u32string_view text, SplitPattern pattern, uint32_t base,
                std::vector<Span>& out);

// MAGI-2's CJK split (Qwen35TextEncoder.__init__):
//   ([\u1100-\u11ff\u2e80-\ua4cf\ua840-\uD7AF\uF900-\uFAFF\uFE30-\uFE4F\uFF65-\uFFDC
//     \U00020000-\U0002FFFF])
// with behaviour "isolated", as HF tokenizers' Oniguruma reads it: it knows \uHHHH but not
// \UHHHHHHHH, so the last item becomes the literals U, 0, 2, F and the range 0-U (U+0030..U+0055).
// Digits, ":;<=>?@" and the capitals A..U are therefore isolated one per piece, and CJK Extension
// B and later are not. The released MAGI-2 code runs with this; we reproduce it on purpose.
bool in_magi2_cjk_class(char32_t c);
void split_magi2_cjk(std::u32string_view text, uint32_t base, std::vector<Span>& out);

}  // namespace avdit::models::text
