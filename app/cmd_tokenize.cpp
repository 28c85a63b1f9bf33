// `avdit tokenize`: the Qwen tokenizer of either pipeline on a prompt or on a strings file, to
// check ids against the references and to see what the text encoder will be given.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "models/text/prompt_magi2.h"
#include "models/text/tokenizer.h"
#include "models/text/unicode.h"

namespace avdit::app {

namespace fs = std::filesystem;
namespace text = models::text;
using nlohmann::ordered_json;

namespace {

struct Opts {
  std::string tokenizer, text, prompt_file, strings, pipeline = "h3";
  bool json = false, figure = false;
};

void warn_truncated(const text::magi2::PromptEncoding& p, std::string_view what) {
  if (p.truncated())
    log::warn("{} is {} tokens: truncated to the first {}, as MAGI-2 does (max_length={})", what,
              p.untruncated_tokens, text::magi2::kMaxTokens, text::magi2::kMaxTokens);
}

// {id: [ids...]} for every string of a strings file in the golden's format.
std::string tokenize_strings(const text::Tokenizer& tok, const Opts& o) {
  std::ifstream f(o.strings, std::ios::binary);
  AVDIT_REQUIRE(f.good(), "cannot read the strings file {}", o.strings);
  std::ostringstream ss;
  ss << f.rdbuf();
  ordered_json j;
  try {
    j = ordered_json::parse(ss.str());
  } catch (const ordered_json::exception& e) {
    throw BadInput(fmt::format("{} is not valid JSON ({})", o.strings, e.what()));
  }
  AVDIT_REQUIRE(
      j.is_object() && j.contains("strings") && j["strings"].is_array(),
      "{}: expected {{\"strings\": [{{\"id\": ..., \"text\": ...}}, ...]}} (the format of "
      "../shared/golden/tokenizer-qwen/strings.json)",
      o.strings);
  ordered_json out = ordered_json::object();
  for (const auto& s : j["strings"]) {
    AVDIT_REQUIRE(s.is_object() && s.contains("id") && s["id"].is_string() && s.contains("text") &&
                      s["text"].is_string(),
                  "{}: every entry of 'strings' needs a string 'id' and a string 'text'",
                  o.strings);
    const std::string id = s["id"].get<std::string>();
    const std::string what = fmt::format("{} string '{}'", o.strings, id);
    const std::u32string chars = text::utf8_to_u32(s["text"].get<std::string>(), what);
    if (tok.pipeline() == text::Pipeline::kMagi2) {
      const auto p = text::magi2::encode_prompt(tok, chars);
      warn_truncated(p, what);
      out[id] = p.encoding.ids;
    } else {
      out[id] = tok.encode(chars).ids;
    }
  }
  return out.dump() + "\n";
}

std::string tokenize_prompt(const text::Tokenizer& tok, const Opts& o) {
  std::u32string prompt;
  std::string what;
  if (!o.prompt_file.empty()) {
    what = fmt::format("prompt file {}", o.prompt_file);
    prompt = text::magi2::read_prompt_file(o.prompt_file);  // .strip()ped, as both references do
    AVDIT_REQUIRE(!prompt.empty(), "{} is empty (or only whitespace): write the prompt into it",
                  o.prompt_file);
  } else {
    what = "--text";
    AVDIT_REQUIRE(!o.text.empty(), "--text is empty: give the prompt to tokenize");
    prompt = text::utf8_to_u32(o.text, what);
  }
  ordered_json j;
  text::Encoding enc;
  if (tok.pipeline() == text::Pipeline::kMagi2) {
    if (o.figure) prompt = text::magi2::ensure_figure_tokens(prompt);
    const auto p = text::magi2::encode_prompt(tok, prompt);
    warn_truncated(p, what);
    if (p.normalized.empty())
      log::warn(
          "{} normalises to an empty prompt (MAGI-2's json_to_compact_markdown keeps none of "
          "its fields): the text encoder would get no tokens",
          what);
    enc = p.encoding;
    j["normalized"] = text::u32_to_utf8(p.normalized);
    j["untruncated_tokens"] = p.untruncated_tokens;
    if (o.figure) {
      const auto indices = text::magi2::target_token_indices(p, U"<Figure 1>");
      j["figure_1_token_indices"] = indices ? ordered_json(*indices) : ordered_json();
    }
  } else {
    enc = tok.encode(prompt);
  }
  if (!o.json) {
    std::string line;
    for (size_t i = 0; i < enc.ids.size(); ++i)
      line += fmt::format("{}{}", i ? " " : "", enc.ids[i]);
    return line + "\n";
  }
  ordered_json out;
  out["ids"] = enc.ids;
  out["tokens"] = enc.tokens;
  ordered_json offsets = ordered_json::array();
  for (const auto& [s, e] : enc.offsets) offsets.push_back({s, e});
  out["offsets"] = offsets;
  out["decoded"] = tok.decode(enc.ids);
  for (auto& [k, v] : j.items()) out[k] = v;
  return out.dump() + "\n";
}

}  // namespace

Run add_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tokenize",
      "Tokenize with the Qwen tokenizer of a text encoder folder (tokenizer.json, or vocab.json +\n"
      "merges.txt + tokenizer_config.json), as the reference pipeline does:\n"
      "  --pipeline h3     MiniMax-H3 (Qwen3-VL): the text as given.\n"
      "  --pipeline magi2  MAGI-2 (Qwen3.5): JSON prompts become compact markdown, at most 7000\n"
      "                    tokens are kept (a longer prompt is truncated with a warning).\n"
      "Prints the ids (space-separated), or with --json an object with ids, tokens, offsets (code\n"
      "points) and the decoded text. --strings FILE.json prints {id: [ids]} for every string of a\n"
      "file in the format of ../shared/golden/tokenizer-qwen/strings.json.\n"
      "Example: avdit tokenize --tokenizer ../shared/golden/tokenizer-qwen --text \"a lovely "
      "cat\"");
  auto o = std::make_shared<Opts>();
  cmd->add_option("--tokenizer", o->tokenizer, "Folder with the tokenizer files")->required();
  auto* text_opt = cmd->add_option("--text", o->text, "The prompt");
  auto* file_opt = cmd->add_option(
      "--prompt-file", o->prompt_file,
      "Read the prompt from a UTF-8 file, stripped as MAGI-2's entry.py reads prompt files");
  auto* strings_opt =
      cmd->add_option("--strings", o->strings, "A strings file (JSON, the golden's format)");
  cmd->add_flag("--json", o->json, "Print a JSON object (ids, tokens, offsets, decoded)");
  cmd->add_option("--pipeline", o->pipeline, "h3 or magi2 (default h3)")
      ->check(CLI::IsMember({"h3", "magi2"}));
  cmd->add_flag("--figure", o->figure,
                "magi2: add the <Figure 1> reference an image-conditioned run adds, and print the "
                "indices of its tokens");
  return [o, text_opt, file_opt, strings_opt]() {
    AVDIT_REQUIRE(text_opt->count() + file_opt->count() + strings_opt->count() == 1,
                  "tokenize: give one of --text, --prompt-file or --strings");
    AVDIT_REQUIRE(!o->figure || o->pipeline == "magi2",
                  "tokenize: --figure is MAGI-2's image reference; use it with --pipeline magi2");
    const auto pipeline = o->pipeline == "magi2" ? text::Pipeline::kMagi2 : text::Pipeline::kH3;
    const text::Tokenizer tok = text::Tokenizer::load(o->tokenizer, pipeline);
    const std::string out =
        strings_opt->count() ? tokenize_strings(tok, *o) : tokenize_prompt(tok, *o);
    std::cout << out << std::flush;
    return 0;
  };
}

}  // namespace avdit::app
