// NFC with the reference's alignments: canonical decomposition, a stable sort of each run of
// combining marks by combining class, then the pairwise recomposition of Unicode's algorithm, each
// code point carrying the "change" count (inserted +1, composed away -1) the alignments come from.
// Decompositions, classes and compositions come from utf8proc, minus the code points the
// reference's Unicode 9.0 tables do not know (unicode_tables.cpp); Hangul is arithmetic.
#include "models/text/nfc.h"

#include <utf8proc.h>

#include <algorithm>
#include <optional>

#include "models/text/unicode_tables.h"

namespace avdit::models::text {

namespace {

// Hangul syllable arithmetic (Unicode ch. 3.12). Only trailing consonants U+11A8..U+11C2 compose.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

bool plain_starter(char32_t c) {
  const auto ranges = tables::nfc_plain_starters();
  auto it =
      std::upper_bound(ranges.begin(), ranges.end(), c,
                       [](char32_t v, const tables::CodePointRange& r) { return v < r.first; });
  return it != ranges.begin() && c <= std::prev(it)->last;
}

uint8_t combining_class(char32_t c) {
  if (c < 0x300 || plain_starter(c)) return 0;
  return static_cast<uint8_t>(
      utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class);
}

// The full canonical decomposition of c, appended to out.
void decompose(char32_t c, std::u32string& out) {
  if (c < 0xC0 || plain_starter(c)) {
    out.push_back(c);
    return;
  }
  if (c >= kSBase && c < kSBase + kSCount) {
    const char32_t s = c - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  utf8proc_int32_t buf[16];
  int boundclass = 0;
  const utf8proc_ssize_t n = utf8proc_decompose_char(
      static_cast<utf8proc_int32_t>(c), buf, 16,
      static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | UTF8PROC_STABLE), &boundclass);
  if (n <= 0 || n > 16) {
    out.push_back(c);
    return;
  }
  for (utf8proc_ssize_t i = 0; i < n; ++i) out.push_back(static_cast<char32_t>(buf[i]));
}

// The primary composite of the starter a and b, if any.
std::optional<char32_t> compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount) {
    if (b >= kVBase && b < kVBase + kVCount)
      return kSBase + ((a - kLBase) * kNCount + (b - kVBase) * kTCount);
    return std::nullopt;
  }
  if (a >= kSBase && a < kSBase + kSCount) {
    if (b > kTBase && b < kTBase + kTCount && (a - kSBase) % kTCount == 0) return a + (b - kTBase);
    return std::nullopt;
  }
  if (b < 0x300 || plain_starter(a) || plain_starter(b)) return std::nullopt;
  // utf8proc composes a buffer in place; with a starter first, two code points become one exactly
  // when they form a primary composite. Its table also holds the composition exclusions (U+0958,
  // U+2ADC, U+1D1BB...): UTF8PROC_STABLE is what leaves those decomposed.
  utf8proc_int32_t buf[2] = {static_cast<utf8proc_int32_t>(a), static_cast<utf8proc_int32_t>(b)};
  if (utf8proc_normalize_utf32(
          buf, 2, static_cast<utf8proc_option_t>(UTF8PROC_COMPOSE | UTF8PROC_STABLE)) != 1)
    return std::nullopt;
  const char32_t r = static_cast<char32_t>(buf[0]);
  if (plain_starter(r)) return std::nullopt;
  return r;
}

struct Item {
  char32_t c;
  int change;  // +1: inserted by a decomposition; -n: n code points composed into this one
};

// Canonical decomposition and ordering: marks are sorted stably by class between starters.
std::vector<Item> decompose_and_order(std::u32string_view input) {
  std::vector<Item> items;
  std::vector<uint8_t> classes;
  items.reserve(input.size() + 8);
  size_t pending = 0;  // items[pending..] still need sorting
  const auto sort_pending = [&] {
    std::vector<size_t> order(items.size() - pending);
    for (size_t i = 0; i < order.size(); ++i) order[i] = pending + i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return classes[x] < classes[y]; });
    std::vector<Item> sorted_items;
    std::vector<uint8_t> sorted_classes;
    for (size_t i : order) {
      sorted_items.push_back(items[i]);
      sorted_classes.push_back(classes[i]);
    }
    std::copy(sorted_items.begin(), sorted_items.end(), items.begin() + pending);
    std::copy(sorted_classes.begin(), sorted_classes.end(), classes.begin() + pending);
    pending = items.size();
  };
  std::u32string parts;
  for (char32_t c : input) {
    parts.clear();
    decompose(c, parts);
    for (size_t j = 0; j < parts.size(); ++j) {
      const uint8_t cls = combining_class(parts[j]);
      if (cls == 0 && items.size() - pending > 1) sort_pending();
      if (cls == 0) pending = items.size();
      items.push_back({parts[j], j == 0 ? 0 : 1});
      classes.push_back(cls);
    }
  }
  if (items.size() - pending > 1) sort_pending();
  return items;
}

// Unicode's recomposition: a mark composes with the last starter unless a mark of the same or a
// higher class stands between them; a starter composes only with the starter right before it.
std::vector<Item> recompose(const std::vector<Item>& items) {
  std::vector<Item> out, held;  // held: marks after the composee that did not compose
  out.reserve(items.size());
  std::optional<Item> composee;
  int last_class = -1;  // class of the last held mark, -1 when none
  for (const Item& item : items) {
    const int cls = combining_class(item.c);
    if (!composee) {
      if (cls != 0) {
        out.push_back(item);
      } else {
        composee = item;
      }
      continue;
    }
    const bool blocked = last_class >= 0 && last_class >= cls;
    if (!blocked) {
      if (auto r = compose(composee->c, item.c)) {
        composee = Item{*r, composee->change + item.change - 1};
        continue;
      }
    }
    if (cls == 0) {
      out.push_back(*composee);
      out.insert(out.end(), held.begin(), held.end());
      held.clear();
      composee = item;
      last_class = -1;
    } else {
      held.push_back(item);
      last_class = cls;
    }
  }
  if (composee) out.push_back(*composee);
  out.insert(out.end(), held.begin(), held.end());
  return out;
}

}  // namespace

NfcText nfc(std::u32string_view input) {
  NfcText r;
  // Below U+0300 nothing decomposes into anything that could change, nor composes: NFC is the
  // identity (the common case: ASCII and Latin-1 prompts).
  if (std::all_of(input.begin(), input.end(), [](char32_t c) { return c < 0x300; })) {
    r.text.assign(input);
    r.align.resize(input.size());
    for (uint32_t i = 0; i < input.size(); ++i) r.align[i] = {i, i + 1};
    return r;
  }
  const std::vector<Item> items = recompose(decompose_and_order(input));
  r.text.reserve(items.size());
  r.align.reserve(items.size());
  uint32_t consumed = 0;  // input code points consumed so far
  for (const Item& item : items) {
    r.text.push_back(item.c);
    if (item.change > 0) {
      r.align.push_back(consumed > 0 ? std::pair{consumed - 1, consumed} : std::pair{0u, 0u});
    } else {
      r.align.push_back({consumed, consumed + 1});
      consumed += 1 + static_cast<uint32_t>(-item.change);
    }
  }
  return r;
}

}  // namespace avdit::models::text
