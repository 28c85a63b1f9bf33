// What `avdit init --pipeline` and `generate --prompt` take from the references: the tokenizer cut
// to a tiny encoder's vocabulary (the same ids as the official tokenizer wherever those fit, every
// id inside the vocabulary otherwise) and MAGI-2's default negative prompt (the words of the
// tokenizer golden's copy of the reference's DEFAULT_NEGATIVE_PROMPT).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <unistd.h>

#include <fstream>

#include "models/text/tokenizer.h"
#include "pipeline/init_pipeline.h"
#include "pipeline/text_to_clip.h"

namespace avdit::pipeline {
namespace {

namespace fs = std::filesystem;
namespace text = models::text;
const fs::path kTok = fs::path(AVDIT_SHARED_DIR) / "golden" / "tokenizer-qwen";

TEST(PipelineInit, TruncatedTokenizerKeepsIdsThatFitAndStaysInside) {
  const fs::path dir = fs::temp_directory_path() / ("avdit-tok-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  constexpr int64_t kVocab = 2048;
  write_truncated_tokenizer(kTok, dir, kVocab);
  const text::Tokenizer full = text::Tokenizer::load(kTok, text::Pipeline::kH3);
  const text::Tokenizer cut = text::Tokenizer::load(dir, text::Pipeline::kH3);
  // Every id of these lies below 2048 - 26 in the official vocabulary: the cut one agrees.
  for (const char* s : {"a test of the day", "This is a test of the"}) {
    const auto a = full.encode(s).ids, b = cut.encode(s).ids;
    EXPECT_EQ(a, b) << s;
  }
  // Text with rare words falls back to shorter pieces, all inside the tiny vocabulary.
  const auto ids = cut.encode("Zyxwv quokkas \xE2\x9C\xA8 juxtapose 12345 \xE6\x97\xA5\xE6\x9C\xAC").ids;
  ASSERT_FALSE(ids.empty());
  for (int32_t id : ids) EXPECT_LT(id, kVocab - 26);
  EXPECT_GT(ids.size(), full.encode("Zyxwv quokkas \xE2\x9C\xA8 juxtapose 12345 \xE6\x97\xA5\xE6\x9C\xAC").ids.size());
  fs::remove_all(dir);
}

TEST(PipelineInit, Magi2NegativePromptIsTheReferences) {
  std::ifstream f(kTok / "strings.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  std::string golden;
  for (const auto& s : j.at("strings"))
    if (s.at("text").get<std::string>().starts_with("Bright tones, overexposed"))
      golden = s.at("text").get<std::string>();
  ASSERT_FALSE(golden.empty()) << "strings.json has no copy of the negative prompt";
  EXPECT_EQ(std::string(kMagi2DefaultNegativePrompt), golden);
}

}  // namespace
}  // namespace avdit::pipeline
