// The byte-level alphabet and the lossy UTF-8 decoding of decoded tokens.
#include "models/text/byte_level.h"

#include <array>

#include "models/text/unicode.h"

namespace avdit::models::text {

namespace {

struct Alphabet {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // every alphabet code point is below U+0144
  Alphabet() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

char32_t byte_to_char(unsigned char b) { return alphabet().to_char[b]; }

int char_to_byte(char32_t c) { return c < 324 ? alphabet().to_byte[c] : -1; }

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, byte_to_char(b));
  return out;
}

void append_token_bytes(std::string& out, std::string_view token_utf8) {
  std::u32string chars;
  std::string bytes;
  if (decode_utf8(token_utf8, chars)) {
    for (char32_t c : chars) {
      const int b = char_to_byte(c);
      if (b < 0) {
        out.append(token_utf8);
        return;
      }
      bytes.push_back(static_cast<char>(b));
    }
    out.append(bytes);
  } else {
    out.append(token_utf8);
  }
}

std::string utf8_lossy(std::string_view s) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char b0 = at(i);
    if (b0 < 0x80) {
      out.push_back(static_cast<char>(b0));
      ++i;
      continue;
    }
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      need = 3;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      need = 4;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    } else {
      out += kReplacement;  // a byte that starts no sequence
      ++i;
      continue;
    }
    // Count the bytes of the longest valid prefix of a sequence (the "maximal subpart").
    size_t len = 1;
    while (len < need && i + len < s.size()) {
      const unsigned char b = at(i + len);
      const bool ok = len == 1 ? (b >= lo && b <= hi) : (b & 0xC0) == 0x80;
      if (!ok) break;
      ++len;
    }
    if (len == need) {
      out.append(s.substr(i, len));
    } else {
      out += kReplacement;
    }
    i += len;
  }
  return out;
}

}  // namespace avdit::models::text
