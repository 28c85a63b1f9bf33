// The Qwen tokenizer and MAGI-2 / H3 prompt handling against the goldens of
// ../shared/golden/tokenizer-qwen (HF tokenizers 0.23.2 and transformers 5.17: ids, tokens,
// offsets, decode, pre-tokens on all 212 strings, both pipelines, the prompt formats, the CJK
// probe) and against held-out strings whose expectations HF tokenizers produced
// (tests/fixtures/tokenizer/README.md). Also bad input and Python-exact JSON printing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "models/text/byte_level.h"
#include "models/text/nfc.h"
#include "models/text/pre_tokenizer.h"
#include "models/text/prompt_h3.h"
#include "models/text/prompt_magi2.h"
#include "models/text/py_json.h"
#include "models/text/tokenizer.h"
#include "models/text/unicode.h"

namespace avdit::models::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kGolden = fs::path(AVDIT_SHARED_DIR) / "golden" / "tokenizer-qwen";
const fs::path kHeldOut =
    fs::path(AVDIT_SOURCE_DIR) / "tests" / "fixtures" / "tokenizer" / "heldout.json";

json read_json(const fs::path& p) {
  std::ifstream f(p);
  EXPECT_TRUE(f.good()) << p;
  return json::parse(f);
}

const Tokenizer& h3() {
  static const Tokenizer t = Tokenizer::load(kGolden, Pipeline::kH3);
  return t;
}
const Tokenizer& magi2() {
  static const Tokenizer t = Tokenizer::load(kGolden, Pipeline::kMagi2);
  return t;
}
const json& strings() {
  static const json j = read_json(kGolden / "strings.json");
  return j;
}

std::u32string u32(const std::string& s) { return utf8_to_u32(s, "test string"); }

std::vector<std::pair<int64_t, int64_t>> offsets_of(const json& j) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& o : j) out.emplace_back(o[0].get<int64_t>(), o[1].get<int64_t>());
  return out;
}

// Compares one encoding (and its decode / pre-tokens) with a golden or held-out record.
void expect_record(const Tokenizer& tok, const std::u32string& text, const Encoding& e,
                   const json& r, const std::string& id) {
  SCOPED_TRACE(id);
  EXPECT_EQ(e.ids, r["ids"].get<std::vector<int32_t>>());
  if (r.contains("tokens")) {
    EXPECT_EQ(e.tokens, r["tokens"].get<std::vector<std::string>>());
  }
  EXPECT_EQ(e.offsets, offsets_of(r["offsets"]));
  EXPECT_EQ(tok.decode(e.ids), r["decoded"].get<std::string>());
  const auto pre = tok.pre_tokenize(text);
  if (r["pretokens"].is_null()) {
    EXPECT_FALSE(pre.has_value());
  } else {
    ASSERT_TRUE(pre.has_value());
    ASSERT_EQ(pre->size(), r["pretokens"].size());
    for (size_t i = 0; i < pre->size(); ++i) {
      EXPECT_EQ((*pre)[i].piece, r["pretokens"][i][0].get<std::string>()) << i;
      EXPECT_EQ((*pre)[i].start, r["pretokens"][i][1].get<int64_t>()) << i;
      EXPECT_EQ((*pre)[i].end, r["pretokens"][i][2].get<int64_t>()) << i;
    }
  }
  if (r.contains("normalized")) {
    EXPECT_EQ(u32_to_utf8(nfc(text).text), r["normalized"].get<std::string>());
  }
}

TEST(TokenizerH3, LoadsLikeTransformers) {
  const json g = read_json(kGolden / "h3_qwen3vl_tokens.json");
  EXPECT_EQ(h3().size(), g["len"].get<size_t>());  // 151676
  for (const auto& [content, id] : g["extra_special_token_ids"].items())
    EXPECT_EQ(h3().token_to_id(content), id.get<int32_t>()) << content;
  for (const auto& t : g["added_tokens"])
    EXPECT_EQ(h3().token_to_id(t["content"].get<std::string>()), t["id"].get<int32_t>());
  for (const auto& [token, id] : g["load_info"]["sanity"]["probe"].items())
    EXPECT_EQ(h3().token_to_id(token), id.get<int32_t>()) << token;
}

TEST(TokenizerH3, AllGoldenStringsExact) {
  const json g = read_json(kGolden / "h3_qwen3vl_tokens.json")["strings"];
  ASSERT_EQ(strings()["strings"].size(), 212u);
  for (const auto& s : strings()["strings"]) {
    const std::string id = s["id"].get<std::string>();
    const std::u32string text = u32(s["text"].get<std::string>());
    expect_record(h3(), text, h3().encode(text), g.at(id), id);
  }
}

TEST(TokenizerH3, PromptFormats) {
  const json pf = read_json(kGolden / "h3_qwen3vl_tokens.json")["prompt_formats"];
  const auto check = [](const h3::TaggedIds& t, const json& c) {
    EXPECT_EQ(t.ids, c["ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(t.tags, c["tags"].get<std::vector<uint8_t>>());
  };
  for (const auto& c : pf["t2va"])
    check(h3::assemble(h3(), h3::t2va_pieces(c["prompt"].get<std::string>())), c);
  for (const auto& c : pf["fl2va"]) {
    const auto counts = c["image_token_counts"].get<std::vector<int64_t>>();
    check(h3::assemble(h3(), h3::fl2va_pieces(c["prompt"].get<std::string>(), counts)), c);
  }
  for (const auto& c : pf["ref2va"]) {
    std::vector<h3::Reference> refs;
    for (const auto& r : c["references"]) {
      h3::Reference ref;
      const std::string kind = r["kind"].get<std::string>();
      ref.kind = kind == "image"   ? h3::Reference::Kind::kImage
                 : kind == "video" ? h3::Reference::Kind::kVideo
                                   : h3::Reference::Kind::kAudio;
      ref.has_audio = r.value("has_audio", false);
      ref.tokens = r.value("tokens", 0);
      ref.timestamps = r.value("timestamps", std::vector<double>{});
      refs.push_back(ref);
    }
    check(h3::assemble(h3(), h3::ref2va_pieces(c["prompt"].get<std::string>(), refs)), c);
  }
  for (const auto& p : pf["video_block_plans"]) {
    const auto ts = h3::video_block_timestamps(p["frames_at_24fps"].get<int64_t>());
    EXPECT_EQ(ts, p["block_timestamps"].get<std::vector<double>>());
    std::vector<std::string> labels;
    for (double t : ts) labels.push_back(h3::seconds_label(t));
    EXPECT_EQ(labels, p["labels"].get<std::vector<std::string>>());
  }
  // Python's f"{t:.1f}" rounds the binary value half to even.
  EXPECT_EQ(h3::seconds_label(0.25), "<0.2 seconds>");
  EXPECT_EQ(h3::seconds_label(1.25), "<1.2 seconds>");
  EXPECT_EQ(h3::seconds_label(0.75), "<0.8 seconds>");
}

TEST(TokenizerMagi2, AllGoldenStringsExact) {
  // Ids are on the Qwen3-VL stand-in vocabulary (the golden's README); pre-tokens and prompt
  // handling are vocabulary-independent.
  const json g = read_json(kGolden / "magi2_qwen35_standin_tokens.json")["strings"];
  for (const auto& s : strings()["strings"]) {
    const std::string id = s["id"].get<std::string>();
    const json& r = g.at(id);
    const auto p = magi2::encode_prompt(magi2(), u32(s["text"].get<std::string>()));
    if (r.contains("prompt_normalized")) {
      EXPECT_EQ(u32_to_utf8(p.normalized), r["prompt_normalized"].get<std::string>()) << id;
    }
    expect_record(magi2(), p.normalized, p.encoding, r, id);
  }
}

TEST(TokenizerMagi2, PromptHandling) {
  const json pf = read_json(kGolden / "magi2_qwen35_standin_tokens.json")["prompt_formats"];
  for (const auto& c : pf["normalization"])
    EXPECT_EQ(u32_to_utf8(magi2::normalize_prompt(u32(c["input"].get<std::string>()))),
              c["normalized"].get<std::string>());
  // _ensure_figure_tokens on the demo prompt (text) and the JSON prompt, then the tokens of
  // "<Figure 1>" whose text states give the image's special embedding.
  std::map<std::string, std::string> text_of;
  for (const auto& s : strings()["strings"]) text_of[s["id"]] = s["text"];
  const char* sources[] = {"real_prompt/0", "real_prompt/1"};
  ASSERT_EQ(pf["i2v_figure_tokens"].size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const json& c = pf["i2v_figure_tokens"][k];
    const std::u32string prompt = magi2::ensure_figure_tokens(u32(text_of.at(sources[k])));
    EXPECT_EQ(u32_to_utf8(prompt), c["prompt"].get<std::string>()) << k;
    const auto p = magi2::encode_prompt(magi2(), prompt);
    EXPECT_EQ(u32_to_utf8(p.normalized), c["normalized"].get<std::string>()) << k;
    EXPECT_EQ(p.encoding.ids, c["ids"].get<std::vector<int32_t>>()) << k;
    const auto idx = magi2::target_token_indices(p, U"<Figure 1>");
    ASSERT_TRUE(idx.has_value());
    EXPECT_EQ(*idx, c["figure_1_token_indices"].get<std::vector<int64_t>>()) << k;
    std::vector<std::string> toks;
    for (int64_t i : *idx) toks.push_back(p.encoding.tokens[i]);
    EXPECT_EQ(toks, c["figure_1_tokens"].get<std::vector<std::string>>());
  }
  // Right truncation at 7000: the demo prompt five times, joined by newlines (44474 characters).
  const json& t = pf["truncation"];
  std::string five = text_of.at("real_prompt/0");
  for (int i = 0; i < 4; ++i) five += "\n" + text_of.at("real_prompt/0");
  const std::u32string long_prompt = u32(five);
  ASSERT_EQ(long_prompt.size(), t["prompt_chars"].get<size_t>());
  const auto p = magi2::encode_prompt(magi2(), long_prompt);
  EXPECT_EQ(p.untruncated_tokens, t["untruncated_len"].get<int64_t>());
  EXPECT_TRUE(p.truncated());
  EXPECT_EQ(p.encoding.ids, t["ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(p.encoding.offsets.size(), 7000u);
}

TEST(TokenizerMagi2, CjkSplitProbe) {
  const json probe = read_json(kGolden / "magi2_qwen35_standin_tokens.json")["cjk_split_probe"];
  ASSERT_GT(probe["rows"].size(), 100u);
  for (const auto& row : probe["rows"]) {
    const char32_t c =
        static_cast<char32_t>(std::stoul(row["cp"].get<std::string>().substr(2), nullptr, 16));
    const bool isolated = row["isolated_by_tokenizers"].get<bool>();
    EXPECT_EQ(in_magi2_cjk_class(c), isolated) << row["cp"];
    // And through the pipeline: between two letters the character is a pre-token of its own.
    const std::u32string text = std::u32string(U"xx") + c + U"yy";
    const auto pre = magi2().pre_tokenize(text);
    ASSERT_TRUE(pre.has_value());
    bool alone = false;
    for (const PreToken& p : *pre) alone |= p.start == 2 && p.end == 3;
    if (isolated) {
      EXPECT_TRUE(alone) << row["cp"];
    }
  }
}

TEST(TokenizerHeldOut, StringsMatchHfTokenizers) {
  const json h = read_json(kHeldOut);
  ASSERT_GE(h["strings"].size(), 200u);
  for (const auto& s : h["strings"]) {
    const std::string id = s["id"].get<std::string>();
    const std::u32string text = u32(s["text"].get<std::string>());
    expect_record(h3(), text, h3().encode(text), s["h3"], "h3 " + id);
    expect_record(magi2(), text, magi2().encode(text), s["magi2"], "magi2 " + id);
  }
}

TEST(TokenizerHeldOut, Magi2PromptHandlingMatchesReference) {
  const json h = read_json(kHeldOut);
  ASSERT_GE(h["magi2_prompts"].size(), 30u);
  for (const auto& c : h["magi2_prompts"]) {
    const std::string id = c["id"].get<std::string>();
    const std::u32string prompt = u32(c["prompt"].get<std::string>());
    EXPECT_EQ(u32_to_utf8(magi2::normalize_prompt(prompt)), c["normalized"].get<std::string>())
        << id;
    EXPECT_EQ(u32_to_utf8(magi2::ensure_figure_tokens(prompt)), c["with_figure"].get<std::string>())
        << id;
    if (c.contains("ids")) {
      const auto p = magi2::encode_prompt(magi2(), prompt);
      EXPECT_EQ(p.encoding.ids, c["ids"].get<std::vector<int32_t>>()) << id;
    }
  }
}

// CPython's repr / json.dumps of floats and strings (expected values printed by CPython 3.11).
TEST(PyJson, PrintsLikeCPython) {
  const std::pair<double, std::u32string> floats[] = {
      {1e16, U"1e+16"},
      {1e15, U"1000000000000000.0"},
      {0.0001, U"0.0001"},
      {1e-05, U"1e-05"},
      {0.1, U"0.1"},
      {1.0 / 3, U"0.3333333333333333"},
      {5e-324, U"5e-324"},
      {-0.0, U"-0.0"},
      {123456789012345678.0, U"1.2345678901234568e+17"},
      {10.0, U"10.0"},
      {1.5e300, U"1.5e+300"},
      {-2.5e-7, U"-2.5e-07"},
      {9999999999999998.0, U"9999999999999998.0"}};
  for (const auto& [x, s] : floats) EXPECT_EQ(pyjson::repr_float(x), s) << x;
  const auto loads = [](std::u32string_view t) { return *pyjson::loads(t).value; };
  EXPECT_EQ(pyjson::repr(loads(
                U"[\"it's\", \"a\\\"b\", \"\\u00e9\\u00a0\\u0007\\ud800\", 1E2, -0, true, null]")),
            U"[\"it's\", 'a\"b', '\u00e9\\xa0\\x07\\ud800', 100.0, 0, True, None]");
  EXPECT_EQ(
      pyjson::dumps(loads(U"{\"b\": [1, 2.50, {}], \"a\": \"x\\u0001\\n\u00e9\", \"b\": NaN}")),
      U"{\"b\": NaN, \"a\": \"x\\u0001\\n\u00e9\"}");
  EXPECT_EQ(pyjson::repr(loads(U"{\"k\": [\"\\ud83d\\ude00\", -Infinity]}")),
            U"{'k': ['\U0001F600', -inf]}");
  for (std::u32string_view bad :
       {U"", U"[1,]", U"{\"a\" 1}", U"01", U"1.", U"\"\t\"", U"\"\\x\"", U"tru", U"{'a': 1}",
        U"\ufeff{}", U"[1] x", U"\"\\ud800\\uzzzz\""})
    EXPECT_EQ(pyjson::loads(bad).error, pyjson::LoadError::kDecode) << u32_to_utf8(bad);
  EXPECT_EQ(pyjson::loads(std::u32string(5000, U'7')).error, pyjson::LoadError::kIntTooLong);
  EXPECT_EQ(pyjson::loads(std::u32string(2000, U'[')).error, pyjson::LoadError::kTooDeep);
}

TEST(ByteLevel, LossyDecodeReplacesMaximalSubparts) {
  // Rust's String::from_utf8_lossy: one U+FFFD per maximal invalid subsequence.
  EXPECT_EQ(utf8_lossy("a\xF0\x9F\x98"), "a\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xE0\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80x"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDx");
  EXPECT_EQ(utf8_lossy("\xC3\xA9\xFF"), "\xC3\xA9\xEF\xBF\xBD");
  // " 🐱" is three tokens that cut the emoji's bytes: the first alone decodes to " " + U+FFFD,
  // all three to the text.
  const std::vector<int32_t> cat = h3().encode_ids(" \xF0\x9F\x90\xB1");
  ASSERT_EQ(cat.size(), 3u);
  EXPECT_EQ(h3().decode(std::vector<int32_t>{cat[0]}), " \xEF\xBF\xBD");
  EXPECT_EQ(h3().decode(cat), " \xF0\x9F\x90\xB1");
}

TEST(TokenizerErrors, BadInputNamesTheProblem) {
  try {
    h3().encode(std::string_view("ok \xFF bad"), "--text");
    FAIL() << "invalid UTF-8 accepted";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("--text is not valid UTF-8: byte 3"), std::string::npos)
        << e.what();
  }
  const fs::path dir = fs::temp_directory_path() / "avdit_tokenizer_test_missing";
  fs::create_directories(dir);
  fs::copy_file(kGolden / "vocab.json", dir / "vocab.json", fs::copy_options::overwrite_existing);
  fs::remove(dir / "merges.txt");
  try {
    Tokenizer::load(dir, Pipeline::kH3);
    FAIL() << "missing merges.txt accepted";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "merges.txt").string()), std::string::npos)
        << e.what();
  }
  {
    std::ofstream(dir / "merges.txt") << "a b c\n";
    std::ofstream(dir / "tokenizer_config.json") << "{}";
    try {
      Tokenizer::load(dir, Pipeline::kH3);
      FAIL() << "malformed merges.txt accepted";
    } catch (const BadInput& e) {
      EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
  EXPECT_THROW(Tokenizer::load(fs::temp_directory_path() / "avdit_no_such_dir", Pipeline::kH3),
               BadInput);
  // A JSON prompt with a lone surrogate escape cannot be encoded (nor can the reference).
  const std::u32string lone = U"{\"global_layer\": {\"context\": \"a\\ud800b\"}}";
  EXPECT_THROW(magi2::encode_prompt(magi2(), lone), BadInput);
}

// vocab.json is read by a direct scan (with nlohmann as the fallback for anything else): escapes,
// surrogate pairs and spacing must come out as JSON defines them, and bad files fail on the file.
TEST(TokenizerFiles, SmallFolderWithEscapes) {
  const fs::path dir = fs::temp_directory_path() / "avdit_tokenizer_test_small";
  fs::create_directories(dir);
  std::ofstream(dir / "vocab.json")
      << "{ \"a\": 0,\"b\" :1 , \"ab\":2, \"\\u0120\": 3, \"\\\"q\\\"\": 4,\n"
         " \"\\ud83d\\ude00\": 5, \"x\\\\y\\/\": 6, \"\\u00e9\\t\": 7}\n";
  std::ofstream(dir / "merges.txt") << "#version: 0.2\na b\n";
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"added_tokens_decoder": {"8": {"content": "<s>", "special": true}}})";
  {
    const Tokenizer tok = Tokenizer::load(dir, Pipeline::kH3);
    EXPECT_EQ(tok.token_to_id("\xC4\xA0"), 3);  // U+0120
    EXPECT_EQ(tok.token_to_id("\"q\""), 4);
    EXPECT_EQ(tok.token_to_id("\xF0\x9F\x98\x80"), 5);
    EXPECT_EQ(tok.token_to_id("x\\y/"), 6);
    EXPECT_EQ(tok.token_to_id("\xC3\xA9\t"), 7);
    EXPECT_EQ(tok.encode_ids("ab<s>b"), (std::vector<int32_t>{2, 8, 1}));
    EXPECT_EQ(tok.size(), 9u);
  }
  std::ofstream(dir / "vocab.json") << R"({"a": 0, "b": 1.5})";
  try {
    Tokenizer::load(dir, Pipeline::kH3);
    FAIL() << "a fractional id accepted";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.json: the id of token 'b' is not an integer"),
              std::string::npos)
        << e.what();
  }
  std::ofstream(dir / "vocab.json") << R"({"a": 0, "b": )";
  try {
    Tokenizer::load(dir, Pipeline::kH3);
    FAIL() << "a truncated vocab.json accepted";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.json is not valid JSON"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// Speed on this machine: loading the folder and encoding a 7000-token prompt. Loose bounds (the
// test machine is shared); the measured figures are printed.
// A long prompt (7,000 tokens of real prompts, CJK and other scripts) through a fresh tokenizer, whose
// word cache starts empty, and again once the cache is full: the cache must not change a token or an
// offset. (Its speed is a benchmark's: the `tokenize` stage of `avdit generate`'s stage table.)
TEST(Tokenizer, LongPromptSameWithColdAndWarmWordCache) {
  const Tokenizer tok = Tokenizer::load(kGolden, Pipeline::kH3);
  std::string prompt;
  Encoding e;
  for (int round = 0; round < 20 && e.ids.size() <= 7000; ++round) {
    for (const auto& s : strings()["strings"])
      if (s["category"] == "real_prompt" || s["category"] == "cjk" || s["category"] == "scripts")
        prompt += s["text"].get<std::string>() + "\n";
    e = tok.encode(prompt);
  }
  ASSERT_GT(e.ids.size(), 7000u);
  prompt = u32_to_utf8(u32(prompt).substr(0, static_cast<size_t>(e.offsets[6999].second)));
  const Tokenizer fresh = Tokenizer::load(kGolden, Pipeline::kH3);  // no word cache yet
  const Encoding cold = fresh.encode(prompt);
  const Encoding warm = fresh.encode(prompt);
  EXPECT_EQ(cold.ids.size(), 7000u);
  EXPECT_EQ(cold.ids, warm.ids);
  EXPECT_EQ(cold.offsets, warm.offsets);
}

}  // namespace
}  // namespace avdit::models::text
