// Markdown rendering of an enhanced caption, following the reference's pe_markdown rules: the
// dropping of empty values, the heading and line layout, and Python's spelling of primitives.
#include "pipeline/enhance/caption_markdown.h"

#include <charconv>
#include <cmath>
#include <string_view>
#include <vector>

namespace avdit::pipeline::enhance {

namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxHeadingLevel = 6;
constexpr std::string_view kListSeparator = " | ";

// Length of the Python-whitespace code point (str.isspace) starting at s[i], else 0.
size_t space_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  auto cp = [&](size_t n) -> uint32_t {  // a well-formed multi-byte sequence, else 0
    if (i + n > s.size()) return 0;
    uint32_t v = c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) v = (v << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    return v;
  };
  if ((c & 0xe0) == 0xc0) {
    const uint32_t v = cp(2);
    return v == 0x85 || v == 0xa0 ? 2 : 0;
  }
  if ((c & 0xf0) == 0xe0) {
    const uint32_t v = cp(3);
    const bool space = v == 0x1680 || (v >= 0x2000 && v <= 0x200a) || v == 0x2028 || v == 0x2029 ||
                       v == 0x202f || v == 0x205f || v == 0x3000;
    return space ? 3 : 0;
  }
  return 0;
}

bool is_blank(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = space_at(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// str.rstrip(): trailing Python whitespace removed (scanned from the front, as UTF-8 is).
std::string rstrip(std::string_view s) {
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = space_at(s, i);
    if (n == 0) {
      ++i;
      end = i;
    } else {
      i += n;
    }
  }
  // `end` may fall inside a multi-byte character whose first byte is not whitespace: extend it.
  while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80) ++end;
  return std::string(s.substr(0, end));
}

bool is_container(const Json& v) { return v.is_object() || v.is_array(); }

// filter_empty: null, blank strings, and arrays / objects left empty are dropped.
bool keep(const Json& v, Json& out) {
  if (v.is_null()) return false;
  if (v.is_string()) {
    if (is_blank(v.get_ref<const std::string&>())) return false;
    out = v;
    return true;
  }
  if (v.is_object()) {
    out = Json::object();
    for (const auto& [k, child] : v.items()) {
      Json c;
      if (keep(child, c)) out[k] = std::move(c);
    }
    return !out.empty();
  }
  if (v.is_array()) {
    out = Json::array();
    for (const auto& child : v) {
      Json c;
      if (keep(child, c)) out.push_back(std::move(c));
    }
    return !out.empty();
  }
  out = v;
  return true;
}

// primitive_to_text with quote_strings and collapse_string_whitespace off.
std::string primitive(const Json& v) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') {
        out += "\\n";
        ++i;
      } else if (s[i] == '\n') {
        out += "\\n";
      } else if (s[i] == '\r') {
        out += "\\r";
      } else if (s[i] == '\t') {
        out += "\\t";
      } else {
        out += s[i];
      }
    }
    return out;
  }
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_null()) return "null";
  if (v.is_number_float()) return python_float_repr(v.get<double>());
  return v.dump();  // integers
}

bool all_primitive(const Json& list) {
  for (const auto& item : list)
    if (is_container(item)) return false;
  return true;
}

std::string heading(int level, std::string_view title) {
  if (level <= kMaxHeadingLevel) return std::string(level, '#') + " " + std::string(title);
  return "*" + std::string(title) + "*";
}

class Renderer {
 public:
  std::vector<std::string> lines;

  // render_value: `key` is null for list items and the root.
  void value(const std::string* key, const Json& v, int level) {
    if (!is_container(v)) {
      lines.push_back(key ? *key + ":" + primitive(v) : primitive(v));
      return;
    }
    if (v.is_array()) {
      if (v.empty()) return;
      if (key) {
        if (all_primitive(v)) {
          std::string inline_list = *key + ":";
          for (size_t i = 0; i < v.size(); ++i)
            inline_list += (i ? std::string(kListSeparator) : "") + primitive(v[i]);
          lines.push_back(std::move(inline_list));
          return;
        }
        lines.push_back(heading(level, *key));
        lines.emplace_back();
      }
      int idx = 0;
      for (const auto& item : v) {
        const std::string title =
            (key && !key->empty() ? *key : std::string("item")) + std::to_string(++idx);
        if (!is_container(item)) {
          lines.push_back(title + ":" + primitive(item));
        } else if (item.is_array()) {
          lines.push_back(heading(level + 1, title));
          lines.emplace_back();
          value(nullptr, item, level + 2);
        } else {
          lines.push_back(heading(level + 1, title));
          lines.emplace_back();
          object_contents(item, level + 2);
          lines.emplace_back();
        }
      }
      return;
    }
    if (key) {
      lines.push_back(heading(level, *key));
      lines.emplace_back();
    }
    object_contents(v, level + (key ? 1 : 0));
  }

  // render_object_contents: scalar and all-primitive list fields first, then nested sections,
  // with a blank line before every container that is not the first field.
  void object_contents(const Json& obj, int level) {
    std::vector<std::pair<const std::string*, const Json*>> simple, nested;
    for (const auto& [k, child] : obj.items()) {
      const bool is_simple = !is_container(child) || (child.is_array() && all_primitive(child));
      (is_simple ? simple : nested).emplace_back(&k, &child);
    }
    simple.insert(simple.end(), nested.begin(), nested.end());
    bool first = true;
    for (const auto& [k, child] : simple) {
      if (!first && is_container(*child) && !lines.empty() && !lines.back().empty())
        lines.emplace_back();
      value(k, *child, level);
      first = false;
    }
  }
};

// normalize_blank_lines: runs of blank lines become one, lines are right-stripped, trailing blank
// lines are removed, and the text ends in a newline.
std::string join(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  int blanks = 0;
  for (const auto& line : lines) {
    if (line.empty()) {
      if (++blanks <= 1) out.emplace_back();
    } else {
      blanks = 0;
      out.push_back(rstrip(line));
    }
  }
  while (!out.empty() && out.back().empty()) out.pop_back();
  std::string text;
  for (size_t i = 0; i < out.size(); ++i) text += (i ? "\n" : "") + out[i];
  return text + "\n";
}

}  // namespace

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "NaN";  // json.dumps spells the non-finite values this way
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits (as Python's repr), then Python's layout of them.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view sci(buf, r.ptr - buf);  // "-d.ddde+XX"
  const bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  const size_t e = sci.find('e');
  std::string digits(sci.substr(0, e));
  if (digits.size() > 1) digits.erase(1, 1);  // drop the point
  const int exp10 = std::stoi(std::string(sci.substr(e + 1)));
  const int decpt = exp10 + 1;  // value = 0.digits * 10^decpt
  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int x = decpt - 1;
    out += (x < 0 ? "e-" : "e+");
    const std::string xs = std::to_string(std::abs(x));
    out += (xs.size() < 2 ? "0" : "") + xs;
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out += digits + std::string(decpt - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

std::string render_caption_markdown(const nlohmann::ordered_json& caption) {
  Json kept;
  if (!keep(caption, kept)) return "";
  Renderer r;
  if (kept.is_object()) {
    bool first = true;
    for (const auto& [k, child] : kept.items()) {
      if (!first) r.lines.emplace_back();
      r.value(&k, child, 1);
      first = false;
    }
  } else {
    r.value(nullptr, kept, 1);
  }
  return join(r.lines);
}

}  // namespace avdit::pipeline::enhance
