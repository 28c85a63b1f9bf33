// UTF-8 and character classes on top of libutf8proc and the generated tables.
#include "models/text/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <span>

#include "core/error.h"
#include "models/text/unicode_tables.h"

namespace avdit::models::text {

namespace {

bool in_ranges(std::span<const tables::CodePointRange> ranges, char32_t c) {
  auto it =
      std::upper_bound(ranges.begin(), ranges.end(), c,
                       [](char32_t v, const tables::CodePointRange& r) { return v < r.first; });
  return it != ranges.begin() && c <= std::prev(it)->last;
}

// Length of the UTF-8 sequence at s[i] if it is valid, else 0.
size_t valid_sequence(std::string_view s, size_t i, char32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = b(i);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  cp = b0 & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (b(i + k) & 0x3F);
  return n;
}

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

}  // namespace

bool decode_utf8(std::string_view s, std::u32string& out, size_t* bad_byte) {
  out.clear();
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    const size_t n = valid_sequence(s, i, cp);
    if (n == 0) {
      if (bad_byte) *bad_byte = i;
      return false;
    }
    out.push_back(cp);
    i += n;
  }
  return true;
}

std::u32string utf8_to_u32(std::string_view s, std::string_view what) {
  std::u32string out;
  size_t bad = 0;
  AVDIT_REQUIRE(decode_utf8(s, out, &bad),
                "{} is not valid UTF-8: byte {} (0x{:02x}) starts no valid sequence; save the text "
                "as UTF-8",
                what, bad, static_cast<unsigned char>(s[bad]));
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string u32_to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

bool is_letter(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  const auto k = category(c);
  if (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) return true;
  return k == UTF8PROC_CATEGORY_CN && in_ranges(tables::letter_additions(), c);
}

bool is_number(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const auto k = category(c);
  if (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO) return true;
  return k == UTF8PROC_CATEGORY_CN && in_ranges(tables::number_additions(), c);
}

bool is_mark(char32_t c) {
  if (c < 0x80) return false;
  const auto k = category(c);
  if (k >= UTF8PROC_CATEGORY_MN && k <= UTF8PROC_CATEGORY_ME) return true;
  return k == UTF8PROC_CATEGORY_CN && in_ranges(tables::mark_additions(), c);
}

bool is_regex_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_python_space(char32_t c) {
  // Bidi class WS, B or S, or category Zs: White_Space plus the information separators 1C-1F.
  return is_regex_space(c) || (c >= 0x1C && c <= 0x1F);
}

bool is_python_printable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

}  // namespace avdit::models::text
