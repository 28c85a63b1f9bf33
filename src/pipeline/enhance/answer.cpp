// Parsing a chat completion and the caption JSON in it, tolerant of the thinking blocks and code
// fences that instruction-tuned models add around an answer.
#include "pipeline/enhance/answer.h"

#include <fmt/format.h>

#include "pipeline/enhance/caption_markdown.h"

namespace avdit::pipeline::enhance {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

// A parse error's message without nlohmann's "[json.exception.parse_error.101] " prefix.
std::string short_error(const Json::exception& e) {
  std::string_view m = e.what();
  if (const auto p = m.find("] "); p != std::string_view::npos) m.remove_prefix(p + 2);
  return std::string(m.substr(0, 160));
}

std::string excerpt(std::string_view s) {
  std::string e(s.substr(0, 80));
  for (char& c : e)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return s.size() > 80 ? e + "..." : e;
}

}  // namespace

std::optional<Completion> parse_completion(std::string_view body, std::string* why) {
  Json j;
  try {
    j = Json::parse(body);
  } catch (const Json::exception& e) {
    *why = fmt::format("the answer body is not JSON ({}): '{}'", short_error(e), excerpt(body));
    return std::nullopt;
  }
  if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() ||
      j["choices"].empty() || !j["choices"][0].is_object()) {
    *why = fmt::format("the answer has no choices[0] (not a chat completion): '{}'", excerpt(body));
    return std::nullopt;
  }
  const Json& choice = j["choices"][0];
  Completion c;
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
    c.finish_reason = choice["finish_reason"].get<std::string>();
  if (choice.contains("message") && choice["message"].is_object()) {
    const Json& m = choice["message"];
    if (m.contains("content") && m["content"].is_string())
      c.content = m["content"].get<std::string>();
  }
  return c;
}

std::string strip_thinking(std::string_view content) {
  std::string s(content);
  // A closing tag before any opening one: the chat template opened the block, so the answer
  // starts inside the thoughts. Everything up to the last such orphan is thinking.
  for (;;) {
    const auto open = s.find(kOpen), close = s.find(kClose);
    if (close == std::string::npos || (open != std::string::npos && open < close)) break;
    s.erase(0, close + kClose.size());
  }
  for (auto pos = s.find(kOpen); pos != std::string::npos; pos = s.find(kOpen, pos)) {
    const auto end = s.find(kClose, pos + kOpen.size());
    s.erase(pos, end == std::string::npos ? std::string::npos : end + kClose.size() - pos);
  }
  return std::string(trim(s));
}

std::optional<Caption> parse_caption(std::string_view text, const Task& task, std::string* why) {
  std::string_view t = trim(text);
  if (t.empty()) {
    *why = "the answer holds no caption (empty content)";
    return std::nullopt;
  }
  // ```json ... ```: the fence's first line and closing fence go.
  if (t.substr(0, 3) == "```") {
    const auto nl = t.find('\n');
    const auto end = t.rfind("```");
    if (nl != std::string_view::npos && end != std::string_view::npos && end > nl)
      t = trim(t.substr(nl + 1, end - nl - 1));
  }
  Json j;
  try {
    j = Json::parse(t);
  } catch (const Json::exception& e) {
    *why = fmt::format("the caption is not valid JSON ({}): '{}'", short_error(e), excerpt(t));
    return std::nullopt;
  }
  if (!j.is_object()) {
    *why = fmt::format("the caption is JSON but not an object: '{}'", excerpt(t));
    return std::nullopt;
  }
  std::string missing;
  for (const auto& k : task.required_keys)
    if (!j.contains(k)) missing += (missing.empty() ? "" : ", ") + k;
  if (!missing.empty()) {
    *why = fmt::format("the {} caption lacks the required key(s) {}", task.name, missing);
    return std::nullopt;
  }
  Caption c;
  c.markdown = render_caption_markdown(j);
  c.fields = std::move(j);
  return c;
}

}  // namespace avdit::pipeline::enhance
