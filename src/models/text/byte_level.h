// GPT-2's byte-level alphabet: every byte is shown as one printable code point, so that a BPE over
// "characters" can spell any UTF-8 string. The Qwen vocabulary is written in this alphabet.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace avdit::models::text {

// The code point that stands for a byte (printable ASCII and Latin-1 stand for themselves; the
// rest move to U+0100 and up, in byte order).
char32_t byte_to_char(unsigned char b);
// The byte a code point stands for, or -1 when it is not in the alphabet.
int char_to_byte(char32_t c);

// UTF-8 of the byte-level spelling of `bytes` (what vocab.json keys look like).
std::string to_byte_level(std::string_view bytes);

// The bytes a token spells: its byte-level code points mapped back, or, when one of them is not in
// the alphabet (an added token such as "<|im_start|>" that is not), the token's own UTF-8.
void append_token_bytes(std::string& out, std::string_view token_utf8);

// UTF-8 bytes to text as Rust's String::from_utf8_lossy does: each maximal invalid subsequence
// becomes one U+FFFD. This is what the reference's byte-level decoder returns.
std::string utf8_lossy(std::string_view bytes);

}  // namespace avdit::models::text
