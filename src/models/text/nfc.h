// Unicode NFC exactly as the reference tokenizer computes it (HF tokenizers: the
// unicode-normalization-alignments crate, Unicode 9.0 data), with its alignments, so that token
// offsets point into the text the user gave and not into its normalised form.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace avdit::models::text {

struct NfcText {
  std::u32string text;
  // align[i]: the input code points [first, second) that text[i] maps back to. The reference aligns
  // positionally: each output code point either replaces the next input code point, swallowing as
  // many more as its composition removed, or is inserted and shares the previous one's range
  // ({0, 0} at the very start). So a reordered mark keeps the slot, not the mark.
  std::vector<std::pair<uint32_t, uint32_t>> align;
};

NfcText nfc(std::u32string_view input);

}  // namespace avdit::models::text
