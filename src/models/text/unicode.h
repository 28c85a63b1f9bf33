// UTF-8 <-> code points and the character classes the Qwen tokenizer and the MAGI-2 prompt
// handling test: the regex classes as HF tokenizers' Oniguruma sees them, Python's str classes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace avdit::models::text {

// Decodes strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). Returns false and
// sets *bad_byte to the offset of the first byte of the first bad sequence when `s` is not valid.
bool decode_utf8(std::string_view s, std::u32string& out, size_t* bad_byte = nullptr);
// decode_utf8, or BadInput naming `what` (a file, an option) and the offending byte.
std::u32string utf8_to_u32(std::string_view s, std::string_view what);
void append_utf8(std::string& out, char32_t c);
std::string u32_to_utf8(std::u32string_view s);
inline int utf8_length(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

// The classes of the Qwen pre-tokenizer regex, as the reference engine (Oniguruma inside HF
// tokenizers 0.23.2, Unicode 16.0) matches them: utf8proc's general categories plus the
// generated additions of unicode_tables.cpp.
bool is_letter(char32_t c);       // \p{L}
bool is_number(char32_t c);       // \p{N}
bool is_mark(char32_t c);         // \p{M}
bool is_regex_space(char32_t c);  // \s: the 25 White_Space code points

// Python's str.isspace() (what str.split() and str.strip() remove) and str.isprintable() (what
// repr() leaves unescaped), from utf8proc's categories.
bool is_python_space(char32_t c);
bool is_python_printable(char32_t c);

}  // namespace avdit::models::text
