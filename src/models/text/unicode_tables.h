// Generated range tables (unicode_tables.cpp) for where the reference tokenizer's Unicode data and
// libutf8proc's disagree; unicode.cpp and nfc.cpp consult them next to utf8proc.
#pragma once

#include <span>

namespace avdit::models::text::tables {

struct CodePointRange {
  char32_t first, last;  // inclusive
};

// Code points that Oniguruma in HF tokenizers (Unicode 16.0) puts in \p{L} / \p{N} / \p{M} and
// that utf8proc leaves unassigned.
std::span<const CodePointRange> letter_additions();
std::span<const CodePointRange> number_additions();
std::span<const CodePointRange> mark_additions();
// Code points that the NFC of HF tokenizers (Unicode 9.0) treats as plain starters: no
// decomposition, combining class 0, never the result of a composition.
std::span<const CodePointRange> nfc_plain_starters();

}  // namespace avdit::models::text::tables
