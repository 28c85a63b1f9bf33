// Reads the tokenizer files with nlohmann::json, checking that they describe the byte-level BPE
// with NFC and a Qwen split regex that tokenizer.cpp implements, and nothing else.
#include "models/text/tokenizer_files.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "models/text/unicode.h"

namespace avdit::models::text {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The Split regexes of the Qwen2 and Qwen3.5 tokenizer.json files, verbatim (pre_tokenizer.h).
constexpr std::string_view kQwen2Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)re"
    R"re(\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen35Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|)re"
    R"re( ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  AVDIT_REQUIRE(f.good(), "cannot read {}", path.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json parse_json(const fs::path& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw BadInput(fmt::format("{} is not valid JSON ({}); restore the file from the model release",
                               path.string(), e.what()));
  }
}

// One added token entry; the reference options we do not implement are rejected, not ignored.
AddedToken added_token(const json& j, int32_t id, const fs::path& file) {
  AVDIT_REQUIRE(j.is_object() && j.contains("content") && j["content"].is_string(),
                "{}: added token {} has no string 'content'", file.string(), id);
  const std::string content = j["content"].get<std::string>();
  for (const char* flag : {"lstrip", "rstrip", "single_word", "normalized"})
    AVDIT_REQUIRE(!j.value(flag, false),
                  "{}: added token '{}' sets '{}', which avdit's tokenizer does not implement "
                  "(the Qwen tokenizers set it to false)",
                  file.string(), content, flag);
  AVDIT_REQUIRE(!content.empty(), "{}: added token {} is empty", file.string(), id);
  return {content, id, j.value("special", false)};
}

void read_vocab_object(const json& v, const fs::path& file, TokenizerFiles& out) {
  AVDIT_REQUIRE(v.is_object() && !v.empty(), "{}: the vocabulary is not a non-empty JSON object",
                file.string());
  out.vocab.reserve(v.size());
  for (auto it = v.begin(); it != v.end(); ++it) {
    AVDIT_REQUIRE(it.value().is_number_integer(), "{}: the id of token '{}' is not an integer",
                  file.string(), it.key());
    out.vocab.emplace(it.key(), it.value().get<int32_t>());
  }
}

// vocab.json is one flat object of ~150k "token": id pairs; a direct scan reads it several times
// faster than building a json tree. False when the text is anything else (then nlohmann parses
// it and reports the error).
bool scan_flat_vocab(std::string_view t, TokenizerFiles& out) {
  size_t i = 0;
  const auto ws = [&] {
    while (i < t.size() && (t[i] == ' ' || t[i] == '\n' || t[i] == '\r' || t[i] == '\t')) ++i;
  };
  const auto hex4 = [&](size_t at, uint32_t& v) {
    if (at + 4 > t.size()) return false;
    v = 0;
    for (size_t k = at; k < at + 4; ++k) {
      const char c = t[k];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return false;
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return true;
  };
  std::string key;
  ws();
  if (i >= t.size() || t[i++] != '{') return false;
  ws();
  if (i < t.size() && t[i] == '}') return false;  // empty: let the caller complain
  for (;;) {
    if (i >= t.size() || t[i++] != '"') return false;
    key.clear();
    for (;;) {
      if (i >= t.size()) return false;
      const char c = t[i++];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        key.push_back(c);
        continue;
      }
      if (i >= t.size()) return false;
      const char e = t[i++];
      static constexpr std::string_view kFrom = "\"\\/bfnrt", kTo = "\"\\/\b\f\n\r\t";
      if (const size_t k = kFrom.find(e); k != std::string_view::npos && e != 'u') {
        key.push_back(kTo[k]);
        continue;
      }
      uint32_t u;
      if (e != 'u' || !hex4(i, u)) return false;
      i += 4;
      if (u >= 0xD800 && u <= 0xDBFF) {
        uint32_t lo;
        if (i + 1 >= t.size() || t[i] != '\\' || t[i + 1] != 'u' || !hex4(i + 2, lo) ||
            lo < 0xDC00 || lo > 0xDFFF)
          return false;
        i += 6;
        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
      } else if (u >= 0xDC00 && u <= 0xDFFF) {
        return false;
      }
      append_utf8(key, static_cast<char32_t>(u));
    }
    std::u32string check;
    if (!decode_utf8(key, check)) return false;
    ws();
    if (i >= t.size() || t[i++] != ':') return false;
    ws();
    int64_t id = 0;
    const size_t digits = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9' && id < (int64_t{1} << 31))
      id = id * 10 + (t[i++] - '0');
    if (i == digits || id >= (int64_t{1} << 31) || (i < t.size() && (t[i] == '.' || t[i] == 'e')))
      return false;
    out.vocab.emplace(key, static_cast<int32_t>(id));
    ws();
    if (i < t.size() && t[i] == ',') {
      ++i;
      ws();
      continue;
    }
    if (i >= t.size() || t[i++] != '}') return false;
    ws();
    return i == t.size();
  }
}

void read_vocab_json(const fs::path& file, TokenizerFiles& out) {
  const std::string text = read_file(file);
  out.vocab.reserve(text.size() / 16);
  if (scan_flat_vocab(text, out)) return;
  out.vocab.clear();
  try {
    read_vocab_object(json::parse(text), file, out);
  } catch (const json::exception& e) {
    throw BadInput(fmt::format("{} is not valid JSON ({}); restore the file from the model release",
                               file.string(), e.what()));
  }
}

void read_merges_txt(const fs::path& file, TokenizerFiles& out) {
  const std::string text = read_file(file);
  size_t line_no = 0;
  for (size_t p = 0; p < text.size();) {
    size_t e = text.find('\n', p);
    if (e == std::string::npos) e = text.size();
    std::string_view line(text.data() + p, e - p);
    p = e + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.starts_with("#version")) continue;
    const size_t sp = line.find(' ');
    AVDIT_REQUIRE(sp != std::string_view::npos && sp > 0 && sp + 1 < line.size() &&
                      line.find(' ', sp + 1) == std::string_view::npos,
                  "{}: line {} is not two tokens separated by one space", file.string(), line_no);
    out.merges.emplace_back(std::string(line.substr(0, sp)), std::string(line.substr(sp + 1)));
  }
}

void read_tokenizer_json(const fs::path& file, TokenizerFiles& out) {
  const json j = parse_json(file);
  AVDIT_REQUIRE(j.is_object() && j.contains("model") && j["model"].is_object(),
                "{}: no 'model' object", file.string());
  const json& model = j["model"];
  AVDIT_REQUIRE(model.value("type", "") == "BPE", "{}: model type '{}' is not BPE", file.string(),
                model.value("type", ""));
  AVDIT_REQUIRE(model.value("continuing_subword_prefix", json()).is_null() ||
                    model.value("continuing_subword_prefix", "") == "",
                "{}: BPE option continuing_subword_prefix is not implemented", file.string());
  AVDIT_REQUIRE(model.value("end_of_word_suffix", json()).is_null() ||
                    model.value("end_of_word_suffix", "") == "",
                "{}: BPE option end_of_word_suffix is not implemented", file.string());
  AVDIT_REQUIRE(!model.value("byte_fallback", false),
                "{}: BPE option byte_fallback is not implemented", file.string());
  AVDIT_REQUIRE(model.value("dropout", json()).is_null(), "{}: BPE dropout is not supported",
                file.string());
  out.ignore_merges = model.value("ignore_merges", false);
  read_vocab_object(model.value("vocab", json()), file, out);
  const json& merges = model.value("merges", json::array());
  AVDIT_REQUIRE(merges.is_array(), "{}: model.merges is not a list", file.string());
  out.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      AVDIT_REQUIRE(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
                    "{}: merge {} '{}' is not two tokens separated by one space", file.string(),
                    i + 1, s);
      out.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {
      AVDIT_REQUIRE(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                    "{}: merge {} is neither \"a b\" nor [a, b]", file.string(), i + 1);
      out.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    }
  }
  for (const json& t : j.value("added_tokens", json::array())) {
    AVDIT_REQUIRE(t.contains("id") && t["id"].is_number_integer(),
                  "{}: an added token has no integer id", file.string());
    out.added.push_back(added_token(t, t["id"].get<int32_t>(), file));
  }
  const json& norm = j.value("normalizer", json());
  AVDIT_REQUIRE(norm.is_object() && norm.value("type", "") == "NFC",
                "{}: normalizer {} is not implemented (only NFC, as Qwen's)", file.string(),
                norm.dump());
  // pre_tokenizer: Sequence[Split(regex, Isolated), ByteLevel(no prefix space, no regex)].
  const json& pre = j.value("pre_tokenizer", json());
  const std::string pre_text = pre.dump();
  const bool shape = pre.is_object() && pre.value("type", "") == "Sequence" &&
                     pre.contains("pretokenizers") && pre["pretokenizers"].size() == 2;
  AVDIT_REQUIRE(shape, "{}: pre_tokenizer {} is not Sequence[Split, ByteLevel]", file.string(),
                pre_text.substr(0, 200));
  const json& split = pre["pretokenizers"][0];
  const json& bl = pre["pretokenizers"][1];
  const std::string regex = split.value("pattern", json::object()).value("Regex", "");
  AVDIT_REQUIRE(split.value("type", "") == "Split" && split.value("behavior", "") == "Isolated" &&
                    !split.value("invert", false),
                "{}: the first pre-tokenizer is not an isolating Split", file.string());
  AVDIT_REQUIRE(regex == kQwen2Regex || regex == kQwen35Regex,
                "{}: split regex '{}' is neither Qwen2's nor Qwen3.5's (the two implemented)",
                file.string(), regex);
  out.pattern = regex == kQwen2Regex ? SplitPattern::kQwen2 : SplitPattern::kQwen35;
  AVDIT_REQUIRE(bl.value("type", "") == "ByteLevel" && !bl.value("add_prefix_space", false) &&
                    !bl.value("use_regex", true),
                "{}: the second pre-tokenizer is not ByteLevel without prefix space and regex",
                file.string());
}

void read_tokenizer_config(const fs::path& file, TokenizerFiles& out, bool added_from_config) {
  const json j = parse_json(file);
  AVDIT_REQUIRE(j.is_object(), "{}: not a JSON object", file.string());
  if (added_from_config) {
    const json decoder = j.value("added_tokens_decoder", json::object());
    for (const auto& [key, t] : decoder.items()) {
      int32_t id = -1;
      try {
        id = std::stoi(key);
      } catch (const std::exception&) {
      }
      AVDIT_REQUIRE(id >= 0, "{}: added_tokens_decoder key '{}' is not an id", file.string(), key);
      out.added.push_back(added_token(t, id, file));
    }
  }
  for (const json& t : j.value("additional_special_tokens", json::array())) {
    if (t.is_string()) {
      out.additional_special.push_back(t.get<std::string>());
    } else if (t.is_object() && t.contains("content") && t["content"].is_string()) {
      out.additional_special.push_back(t["content"].get<std::string>());
    }
  }
}

}  // namespace

TokenizerFiles read_tokenizer_files(const fs::path& dir) {
  AVDIT_REQUIRE(fs::is_directory(dir),
                "tokenizer folder {} does not exist (give the folder with "
                "tokenizer.json or vocab.json + merges.txt + tokenizer_config.json)",
                dir.string());
  TokenizerFiles out;
  const fs::path tj = dir / "tokenizer.json", config = dir / "tokenizer_config.json";
  if (fs::exists(tj)) {
    read_tokenizer_json(tj, out);
    out.source = tj.string();
    if (fs::exists(config)) read_tokenizer_config(config, out, false);
    return out;
  }
  const fs::path vocab = dir / "vocab.json", merges = dir / "merges.txt";
  for (const fs::path& f : {vocab, merges, config})
    AVDIT_REQUIRE(fs::exists(f),
                  "{} is missing (the tokenizer needs tokenizer.json, or vocab.json + merges.txt + "
                  "tokenizer_config.json, from the model's text encoder folder)",
                  f.string());
  read_vocab_json(vocab, out);
  read_merges_txt(merges, out);
  read_tokenizer_config(config, out, true);
  out.source = fmt::format("{} + merges.txt + tokenizer_config.json", vocab.string());
  return out;
}

}  // namespace avdit::models::text
