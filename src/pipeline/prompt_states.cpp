#include "pipeline/prompt_states.h"

#include "core/error.h"
#include "core/log.h"
#include "models/text/prompt_h3.h"
#include "models/text/prompt_magi2.h"
#include "models/text/qwen35/cond_uncond.h"
#include "models/text/text_encoder.h"
#include "models/text/tokenizer.h"
#include "models/text/unicode.h"

namespace avdit::pipeline {

namespace text = models::text;

PromptIds tokenize_prompts(const std::filesystem::path& tokenizer_dir, const std::string& family,
                           const std::string& prompt, const std::string& negative,
                           const char* prompt_option, const char* negative_option) {
  AVDIT_REQUIRE(!prompt.empty(), "{} is empty: give the text to encode", prompt_option);
  PromptIds out;
  out.magi2 = family == "qwen3_5";
  AVDIT_REQUIRE(negative.empty() || out.magi2,
                "{} applies to MAGI-2's encoder (model_type qwen3_5); MiniMax-H3 is "
                "CFG-distilled and encodes no negative prompt",
                negative_option);
  if (out.magi2) {
    // MAGI-2: strip, JSON -> markdown, <Figure N> suffix, the 7,000-token limit (truncated as the
    // reference does, with a warning).
    const auto u = text::utf8_to_u32(prompt, prompt_option);
    const auto un = text::utf8_to_u32(negative, negative_option);
    const text::Tokenizer tok = text::Tokenizer::load(tokenizer_dir, text::Pipeline::kMagi2);
    auto ids_of = [&](const std::u32string& p, const char* what) {
      const text::magi2::PromptEncoding e = text::magi2::encode_prompt(tok, p);
      if (e.truncated())
        log::warn("{}: {} tokens, truncated to {} as the reference does", what,
                  e.untruncated_tokens, text::magi2::kMaxTokens);
      AVDIT_REQUIRE(!e.encoding.ids.empty(), "{} gives no tokens", what);
      return e.encoding.ids;
    };
    out.prompt = ids_of(u, prompt_option);
    if (!negative.empty()) {
      out.negative = ids_of(un, negative_option);
      out.has_negative = true;
    }
  } else {
    text::utf8_to_u32(prompt, prompt_option);  // invalid UTF-8 named before the tokenizer loads
    const text::Tokenizer tok = text::Tokenizer::load(tokenizer_dir, text::Pipeline::kH3);
    // MiniMax-H3 T2VA: the prompt verbatim, no template, no special tokens, all rows text.
    const text::h3::TaggedIds t = text::h3::assemble(tok, text::h3::t2va_pieces(prompt));
    AVDIT_REQUIRE(!t.ids.empty(), "{} gives no tokens", prompt_option);
    out.prompt = t.ids;
    out.tags = t.tags;
  }
  return out;
}

NamedTensors encode_prompt_states(const text::TextEncoder& encoder, const PromptIds& ids, bool bf16,
                                  int64_t* tokens) {
  NamedTensors tensors;
  if (ids.magi2) {
    // What MAGI-2's sampler receives: bf16-rounded states, cond and uncond zero-padded to one
    // length, their true lengths beside them.
    const text::CondUncond cu =
        text::encode_cond_uncond(encoder, ids.prompt, ids.has_negative ? &ids.negative : nullptr);
    if (tokens) *tokens = cu.cond_len + cu.uncond_len;
    auto batch = [&](const Tensor& t) {
      const Tensor b = t.reshape({1, t.size(0), t.size(1)});
      return bf16 ? b.to(DType::BF16) : b;
    };
    tensors.emplace_back("txt_feat", batch(cu.cond));
    tensors.emplace_back("txt_len", Tensor::from_data({1}, DType::I64, &cu.cond_len));
    if (ids.has_negative) {
      tensors.emplace_back("null_txt_feat", batch(cu.uncond));
      tensors.emplace_back("null_txt_len", Tensor::from_data({1}, DType::I64, &cu.uncond_len));
    }
    return tensors;
  }
  const Tensor states = encoder.encode(ids.prompt);
  const int64_t T = static_cast<int64_t>(ids.prompt.size());
  if (tokens) *tokens = T;
  std::vector<int64_t> tags(ids.tags.begin(), ids.tags.end());
  // The pipelines hand the DiT the states in the text encoder's dtype (bf16).
  tensors.emplace_back("text_embeds", bf16 ? states.to(DType::BF16) : states);
  tensors.emplace_back("text_token_tags", Tensor::from_data({T}, DType::I64, tags.data()));
  return tensors;
}

}  // namespace avdit::pipeline
