// MAGI-2 prompt handling on the Python-exact JSON values of py_json.h. json_to_compact_markdown is
// rewritten here from its observable behaviour: the same fields, in the same order, joined the
// same way.
#include "models/text/prompt_magi2.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "models/text/py_json.h"
#include "models/text/unicode.h"

namespace avdit::models::text::magi2 {

namespace {

using pyjson::Value;

constexpr std::u32string_view kFigureHint = U"The first frame refers to <Figure 1>";

// The reference raised TypeError inside json_to_compact_markdown; _normalize_prompt catches it.
struct TypeError {};

std::u32string rstrip(std::u32string_view s) {
  size_t e = s.size();
  while (e > 0 && is_python_space(s[e - 1])) --e;
  return std::u32string(s.substr(0, e));
}

bool blank(std::u32string_view s) {
  for (char32_t c : s)
    if (!is_python_space(c)) return false;
  return true;
}

// strip_empty: drops None, [] and {} values from dicts (after stripping them) and None from lists.
Value strip_empty(const Value& v) {
  if (v.is_dict()) {
    Value out;
    out.type = Value::Type::kDict;
    for (const pyjson::Member& m : v.dict) {
      Value s = strip_empty(m.value);
      const bool empty = s.type == Value::Type::kNone || (s.is_list() && s.list.empty()) ||
                         (s.is_dict() && s.dict.empty());
      if (!empty) out.dict.push_back({m.key, std::move(s)});
    }
    return out;
  }
  if (v.is_list()) {
    Value out;
    out.type = Value::Type::kList;
    for (const Value& item : v.list)
      if (item.type != Value::Type::kNone) out.list.push_back(strip_empty(item));
    return out;
  }
  return v;
}

// _one_line: str(value) with every whitespace run collapsed to one space, ends trimmed.
std::u32string one_line(const Value* v) {
  if (!v || v->type == Value::Type::kNone) return U"";
  const std::u32string s = pyjson::str(*v);
  std::u32string out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_python_space(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !is_python_space(s[j])) ++j;
    if (j > i) {
      if (!out.empty()) out.push_back(' ');
      out.append(s, i, j - i);
    }
    i = j;
  }
  return out;
}

const Value& empty_dict() {
  static const Value v = [] {
    Value d;
    d.type = Value::Type::kDict;
    return d;
  }();
  return v;
}

// _as_dict
const Value& as_dict(const Value* v) { return v && v->is_dict() ? *v : empty_dict(); }

// _as_list
std::vector<const Value*> as_list(const Value* v) {
  std::vector<const Value*> out;
  if (!v || v->type == Value::Type::kNone) return out;
  if (v->is_list()) {
    for (const Value& item : v->list) out.push_back(&item);
  } else {
    out.push_back(v);
  }
  return out;
}

// The dicts met by `for x in (d.get(key, []) or [])`: a list's items; a dict's keys and a string's
// characters are iterated but never dicts; iterating a true number or bool is a TypeError.
std::vector<const Value*> dicts_in(const Value* v) {
  std::vector<const Value*> out;
  if (!v || !v->truthy()) return out;
  if (v->is_list()) {
    for (const Value& item : v->list)
      if (item.is_dict()) out.push_back(&item);
    return out;
  }
  if (v->is_dict() || v->is_string()) return out;
  throw TypeError{};
}

std::u32string join(const std::vector<std::u32string>& parts, std::u32string_view sep) {
  std::u32string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::vector<std::u32string> non_empty(std::initializer_list<std::u32string> parts) {
  std::vector<std::u32string> out;
  for (const auto& p : parts)
    if (!p.empty()) out.push_back(p);
  return out;
}

// json_to_compact_markdown's body for obj = strip_empty(json) with "global_layer" in it.
std::u32string compact_markdown(const Value& obj) {
  const Value& global = as_dict(obj.get(U"global_layer"));
  const Value& dynamic = as_dict(obj.get(U"dynamic_layer"));
  std::vector<std::u32string> lines;

  const std::u32string context = one_line(global.get(U"context"));
  const std::u32string description = one_line(global.get(U"description"));
  if (!context.empty() || !description.empty()) {
    lines.push_back(context.empty() ? U"context" : U"context: " + context);
    if (!description.empty()) lines.push_back(description);
  }

  const Value& aesthetics = as_dict(global.get(U"aesthetics"));
  std::vector<std::u32string> aesthetic_parts;
  for (const auto& [label, key] :
       {std::pair<std::u32string_view, std::u32string_view>{U"style", U"style"},
        {U"mood", U"mood_atmosphere"},
        {U"color", U"color_scheme"}}) {
    const std::u32string v = one_line(aesthetics.get(key));
    if (!v.empty()) aesthetic_parts.push_back(std::u32string(label) + U"=" + v);
  }
  if (!aesthetic_parts.empty()) lines.push_back(U"aesthetics: " + join(aesthetic_parts, U"; "));

  const Value& audio = as_dict(global.get(U"audio_baseline"));
  const Value& dialogue = as_dict(audio.get(U"dialogue"));
  std::vector<std::u32string> audio_parts;
  const std::u32string language = one_line(dialogue.get(U"language"));
  const std::vector<const Value*> speakers = as_list(dialogue.get(U"speaker_tags"));
  const std::u32string ambience = one_line(audio.get(U"ambience"));
  if (!language.empty()) audio_parts.push_back(U"language=" + language);
  if (!speakers.empty()) {
    std::vector<std::u32string> names;
    for (const Value* s : speakers) names.push_back(one_line(s));
    audio_parts.push_back(U"speakers=" + join(names, U","));
  }
  if (!ambience.empty()) audio_parts.push_back(U"ambience=" + ambience);
  if (!audio_parts.empty()) lines.push_back(U"audio: " + join(audio_parts, U"; "));

  const Value* subjects = global.get(U"alive_subjects_static");
  if (subjects && subjects->is_list() && !subjects->list.empty()) {
    lines.push_back(U"subjects:");
    for (const Value& subject : subjects->list) {
      if (!subject.is_dict()) continue;
      const Value& attributes = as_dict(subject.get(U"visual_attributes"));
      std::vector<std::u32string> attrs;
      for (std::u32string_view key :
           {U"gender", U"age_group", U"ethnicity", U"clothing", U"appearance_details"}) {
        const Value* v = attributes.get(key);
        const bool picked = v && v->type != Value::Type::kNone &&
                            !(v->is_list() && v->list.empty()) &&
                            !(v->is_dict() && v->dict.empty());
        if (!picked) continue;
        const std::u32string value = one_line(v);
        if (!value.empty()) attrs.push_back(std::u32string(key) + U"=" + value);
      }
      std::u32string row = U" - " + join(non_empty({one_line(subject.get(U"subject_id")),
                                                    one_line(subject.get(U"description"))}),
                                         U" | ");
      const std::u32string extra = join(
          non_empty({one_line(subject.get(U"position")), one_line(subject.get(U"orientation"))}),
          U"; ");
      if (!extra.empty()) row += U" (" + extra + U")";
      if (!attrs.empty()) row += U" :: " + join(attrs, U"; ");
      lines.push_back(row);
    }
  }

  const Value* objects = global.get(U"objects_static");
  if (objects && objects->is_list() && !objects->list.empty()) {
    lines.push_back(U"objects:");
    for (const Value& item : objects->list) {
      if (!item.is_dict()) continue;
      std::u32string row =
          U" - " +
          join(non_empty({one_line(item.get(U"object_id")), one_line(item.get(U"description"))}),
               U" | ");
      const std::u32string details =
          join(non_empty({one_line(item.get(U"shape_and_color")), one_line(item.get(U"position"))}),
               U"; ");
      if (!details.empty()) row += U" :: " + details;
      lines.push_back(row);
    }
  }

  const Value* segments = dynamic.get(U"timeline_segments");
  if (segments && segments->is_list() && !segments->list.empty()) {
    lines.push_back(U"timeline:");
    for (const Value& segment : segments->list) {
      if (!segment.is_dict()) continue;
      const Value& basic = as_dict(segment.get(U"segment_basic_info"));
      const std::u32string timestamp = one_line(basic.get(U"timestamp_range"));
      const std::u32string desc = one_line(basic.get(U"segment_description"));
      std::u32string head = timestamp.empty() ? U" -" : U" - " + timestamp;
      if (!desc.empty()) head += U" " + desc;
      lines.push_back(rstrip(head));

      const Value& segment_audio = as_dict(segment.get(U"audio"));
      for (const Value* line : dicts_in(segment_audio.get(U"dialogue_lines"))) {
        const std::u32string speaker = one_line(line->get(U"speaker"));
        const std::u32string text = one_line(line->get(U"text"));
        const std::u32string at = one_line(line->get(U"timestamp"));
        if (text.empty()) continue;
        std::u32string row =
            (speaker.empty() ? U"   - dialogue: " : U"   - dialogue " + speaker + U": ") + text;
        if (!at.empty()) row += U" (" + at + U")";
        lines.push_back(row);
      }
      for (const Value* alive : dicts_in(segment.get(U"alive_subjects"))) {
        const std::u32string sid = one_line(alive->get(U"subject_id"));
        const Value& action = as_dict(alive->get(U"action"));
        const auto parts = non_empty({one_line(action.get(U"primary_action")),
                                      one_line(action.get(U"interaction")),
                                      one_line(action.get(U"facial_expression"))});
        if (!parts.empty()) lines.push_back(U"   - action " + sid + U": " + join(parts, U"; "));
      }
      for (const Value* item : dicts_in(segment.get(U"objects"))) {
        const std::u32string oid = one_line(item->get(U"object_id"));
        const Value& state = as_dict(item->get(U"dynamic_state"));
        const auto parts = non_empty(
            {one_line(state.get(U"state_change")), one_line(state.get(U"motion_detail"))});
        if (!parts.empty()) lines.push_back(U"   - objects " + oid + U": " + join(parts, U"; "));
      }
    }
  }

  const Value* reference = obj.get(U"reference_layer");
  if (reference && reference->is_list())
    for (const Value& line : reference->list) {
      std::u32string s = pyjson::str(line);
      if (!blank(s)) lines.push_back(std::move(s));
    }

  std::vector<std::u32string> kept;
  for (auto& line : lines)
    if (!blank(line)) kept.push_back(std::move(line));
  return join(kept, U"\n");
}

// json.loads failures that the reference does not catch.
void require_loadable(const pyjson::Loaded& r, std::string_view where) {
  AVDIT_REQUIRE(r.error != pyjson::LoadError::kTooDeep,
                "the prompt is JSON nested more than 900 levels deep; MAGI-2's {} fails on it "
                "(RecursionError): flatten the prompt",
                where);
  AVDIT_REQUIRE(r.error != pyjson::LoadError::kIntTooLong,
                "the prompt is JSON with an integer of more than 4300 digits; MAGI-2's {} fails on "
                "it (ValueError): shorten the number",
                where);
}

}  // namespace

std::u32string strip(std::u32string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_python_space(s[b])) ++b;
  while (e > b && is_python_space(s[e - 1])) --e;
  return std::u32string(s.substr(b, e - b));
}

std::u32string read_prompt_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  AVDIT_REQUIRE(f.good(), "cannot read the prompt file {}", path.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return strip(utf8_to_u32(ss.str(), fmt::format("prompt file {}", path.string())));
}

std::u32string normalize_prompt(std::u32string_view prompt) {
  const pyjson::Loaded r = pyjson::loads(prompt);
  require_loadable(r, "_normalize_prompt");
  if (!r.value || !(r.value->is_dict() || r.value->is_list())) return std::u32string(prompt);
  const Value obj = strip_empty(*r.value);
  if (!obj.is_dict() || !obj.get(U"global_layer")) return std::u32string(prompt);
  try {
    return compact_markdown(obj);
  } catch (const TypeError&) {
    return std::u32string(prompt);
  }
}

std::u32string ensure_figure_tokens(std::u32string_view prompt) {
  pyjson::Loaded r = pyjson::loads(prompt);
  AVDIT_REQUIRE(r.error != pyjson::LoadError::kTooDeep,
                "the prompt is JSON nested more than 900 levels deep; MAGI-2's "
                "_ensure_figure_tokens fails on it (RecursionError): flatten the prompt");
  if (r.value && r.value->is_dict()) {
    Value hint;
    hint.type = Value::Type::kString;
    hint.string = kFigureHint;
    Value list;
    list.type = Value::Type::kList;
    list.list.push_back(std::move(hint));
    r.value->set(U"reference_layer", std::move(list));
    return pyjson::dumps(*r.value);
  }
  return std::u32string(prompt) + U"reference_layer:" + std::u32string(kFigureHint);
}

PromptEncoding encode_prompt(const Tokenizer& tokenizer, std::u32string_view prompt) {
  PromptEncoding out;
  out.normalized = normalize_prompt(prompt);
  for (char32_t c : out.normalized)
    AVDIT_REQUIRE(c < 0xD800 || c > 0xDFFF,
                  "the prompt's JSON holds the lone surrogate escape \\u{:04x}, which has no UTF-8 "
                  "form (the reference tokenizer rejects it too): fix the escape",
                  static_cast<uint32_t>(c));
  out.encoding = tokenizer.encode(out.normalized);
  out.untruncated_tokens = static_cast<int64_t>(out.encoding.ids.size());
  if (out.truncated()) {
    out.encoding.ids.resize(kMaxTokens);
    out.encoding.tokens.resize(kMaxTokens);
    out.encoding.offsets.resize(kMaxTokens);
  }
  return out;
}

std::optional<std::vector<int64_t>> target_token_indices(const PromptEncoding& prompt,
                                                         std::u32string_view target) {
  if (target.empty()) return std::nullopt;
  const size_t at = prompt.normalized.find(target);
  if (at == std::u32string::npos) return std::nullopt;
  const int64_t start = static_cast<int64_t>(at), end = start + static_cast<int64_t>(target.size());
  std::vector<int64_t> out;
  const auto& offsets = prompt.encoding.offsets;
  for (size_t i = 0; i < offsets.size(); ++i) {
    const auto [s, e] = offsets[i];
    if (s == 0 && e == 0 && i != 0) continue;
    if (std::max(s, start) < std::min(e, end)) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

}  // namespace avdit::models::text::magi2
