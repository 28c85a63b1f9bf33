// A JSON parser and printers with CPython's exact behaviour (Modules/_json.c, Objects/*repr):
// which inputs are errors, how numbers become int or float, how floats and strings print.
#include "models/text/py_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "models/text/unicode.h"

namespace avdit::models::text::pyjson {

namespace {

constexpr int kMaxDepth = 900;          // deeper nesting: RecursionError in CPython
constexpr size_t kMaxIntDigits = 4300;  // sys.int_info.default_max_str_digits

std::u32string ascii(std::string_view s) { return std::u32string(s.begin(), s.end()); }

class Parser {
 public:
  explicit Parser(std::u32string_view s) : s_(s) {}

  Loaded run() {
    Loaded r;
    size_t i = skip_ws(0);
    Value v;
    if (!value(i, v, 0)) {
      r.error = error_;
      return r;
    }
    if (skip_ws(i) != s_.size()) {  // "Extra data"
      r.error = LoadError::kDecode;
      return r;
    }
    r.value = std::move(v);
    return r;
  }

 private:
  bool fail(LoadError e = LoadError::kDecode) {
    error_ = e;
    return false;
  }
  size_t skip_ws(size_t i) const {
    while (i < s_.size() && (s_[i] == ' ' || s_[i] == '\t' || s_[i] == '\n' || s_[i] == '\r')) ++i;
    return i;
  }
  bool literal(size_t& i, std::string_view word) const {
    if (s_.substr(i, word.size()) != ascii(word)) return false;
    i += word.size();
    return true;
  }
  static bool digit(char32_t c) { return c >= '0' && c <= '9'; }
  static int hex(char32_t c) {
    if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
    return -1;
  }
  bool hex4(size_t i, char32_t& out) const {
    if (i + 4 > s_.size()) return false;
    out = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int h = hex(s_[i + k]);
      if (h < 0) return false;
      out = (out << 4) | static_cast<char32_t>(h);
    }
    return true;
  }

  // i is just past the opening quote.
  bool string(size_t& i, std::u32string& out) {
    for (;;) {
      if (i >= s_.size()) return fail();  // unterminated
      const char32_t c = s_[i++];
      if (c == '"') return true;
      if (c < 0x20) return fail();  // strict: raw control character
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i >= s_.size()) return fail();
      const char32_t e = s_[i++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          char32_t u;
          if (!hex4(i, u)) return fail();
          i += 4;
          // A high surrogate followed by "\u": that escape must be 4 hex digits; a low surrogate
          // joins the pair, anything else is read again as its own escape.
          if (u >= 0xD800 && u <= 0xDBFF && i + 1 < s_.size() && s_[i] == '\\' &&
              s_[i + 1] == 'u') {
            char32_t lo;
            if (!hex4(i + 2, lo)) return fail();
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
              i += 6;
            }
          }
          out.push_back(u);
          break;
        }
        default: return fail();  // invalid escape
      }
    }
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? ; false (no error set) when no number starts
  // here.
  bool number(size_t& i, Value& v, bool& matched) {
    size_t k = i;
    matched = false;
    if (k < s_.size() && s_[k] == '-') ++k;
    if (k >= s_.size()) return true;
    if (s_[k] >= '1' && s_[k] <= '9') {
      while (k < s_.size() && digit(s_[k])) ++k;
    } else if (s_[k] == '0') {
      ++k;
    } else {
      return true;
    }
    bool is_float = false;
    if (k + 1 < s_.size() && s_[k] == '.' && digit(s_[k + 1])) {
      is_float = true;
      k += 2;
      while (k < s_.size() && digit(s_[k])) ++k;
    }
    if (k < s_.size() && (s_[k] == 'e' || s_[k] == 'E')) {
      size_t e = k + 1;
      if (e < s_.size() && (s_[e] == '-' || s_[e] == '+')) ++e;
      const size_t digits_at = e;
      while (e < s_.size() && digit(s_[e])) ++e;
      if (e > digits_at) {
        is_float = true;
        k = e;
      }
    }
    matched = true;
    std::string text(s_.begin() + i, s_.begin() + k);
    i = k;
    if (is_float) {
      v.type = Value::Type::kFloat;
      v.number = std::strtod(text.c_str(), nullptr);  // correctly rounded; overflow gives inf
      return true;
    }
    const bool negative = text[0] == '-';
    std::string digits = text.substr(negative ? 1 : 0);
    if (digits.size() > kMaxIntDigits) return fail(LoadError::kIntTooLong);
    v.type = Value::Type::kInt;
    v.int_digits = (negative && digits != "0") ? "-" + digits : digits;
    return true;
  }

  bool value(size_t& i, Value& v, int depth) {
    if (depth > kMaxDepth) return fail(LoadError::kTooDeep);
    if (i >= s_.size()) return fail();
    const char32_t c = s_[i];
    if (c == '"') {
      ++i;
      v.type = Value::Type::kString;
      return string(i, v.string);
    }
    if (c == '{') return object(i, v, depth);
    if (c == '[') return array(i, v, depth);
    if (literal(i, "null")) {
      v.type = Value::Type::kNone;
      return true;
    }
    if (literal(i, "true") || literal(i, "false")) {
      v.type = Value::Type::kBool;
      v.boolean = c == 't';
      return true;
    }
    bool matched = false;
    if (!number(i, v, matched)) return false;
    if (matched) return true;
    v.type = Value::Type::kFloat;
    if (literal(i, "NaN")) {
      v.number = std::nan("");
      return true;
    }
    if (literal(i, "Infinity")) {
      v.number = INFINITY;
      return true;
    }
    if (literal(i, "-Infinity")) {
      v.number = -INFINITY;
      return true;
    }
    return fail();
  }

  bool object(size_t& i, Value& v, int depth) {
    v.type = Value::Type::kDict;
    i = skip_ws(i + 1);
    if (i < s_.size() && s_[i] == '}') {
      ++i;
      return true;
    }
    for (;;) {
      if (i >= s_.size() || s_[i] != '"') return fail();
      std::u32string key;
      ++i;
      if (!string(i, key)) return false;
      i = skip_ws(i);
      if (i >= s_.size() || s_[i] != ':') return fail();
      i = skip_ws(i + 1);
      Value item;
      if (!value(i, item, depth + 1)) return false;
      v.set(std::move(key), std::move(item));
      i = skip_ws(i);
      if (i < s_.size() && s_[i] == '}') {
        ++i;
        return true;
      }
      if (i >= s_.size() || s_[i] != ',') return fail();
      i = skip_ws(i + 1);
    }
  }

  bool array(size_t& i, Value& v, int depth) {
    v.type = Value::Type::kList;
    i = skip_ws(i + 1);
    if (i < s_.size() && s_[i] == ']') {
      ++i;
      return true;
    }
    for (;;) {
      Value item;
      if (!value(i, item, depth + 1)) return false;
      v.list.push_back(std::move(item));
      i = skip_ws(i);
      if (i < s_.size() && s_[i] == ']') {
        ++i;
        return true;
      }
      if (i >= s_.size() || s_[i] != ',') return fail();
      i = skip_ws(i + 1);
    }
  }

  std::u32string_view s_;
  LoadError error_ = LoadError::kNone;
};

void append_hex(std::u32string& out, char32_t c, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int k = digits - 1; k >= 0; --k)
    out.push_back(static_cast<char32_t>(kHex[(c >> (4 * k)) & 0xF]));
}

std::u32string repr_string(std::u32string_view s) {
  const bool has_single = s.find(U'\'') != std::u32string_view::npos;
  const bool has_double = s.find(U'"') != std::u32string_view::npos;
  const char32_t quote = has_single && !has_double ? U'"' : U'\'';
  std::u32string out(1, quote);
  for (char32_t c : s) {
    if (c == quote || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\t') {
      out += U"\\t";
    } else if (c == '\n') {
      out += U"\\n";
    } else if (c == '\r') {
      out += U"\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += U"\\x";
      append_hex(out, c, 2);
    } else if (c < 0x7F || is_python_printable(c)) {
      out.push_back(c);
    } else if (c <= 0xFF) {
      out += U"\\x";
      append_hex(out, c, 2);
    } else if (c <= 0xFFFF) {
      out += U"\\u";
      append_hex(out, c, 4);
    } else {
      out += U"\\U";
      append_hex(out, c, 8);
    }
  }
  out.push_back(quote);
  return out;
}

std::u32string dumps_string(std::u32string_view s) {
  std::u32string out(1, U'"');
  for (char32_t c : s) {
    switch (c) {
      case '"': out += U"\\\""; break;
      case '\\': out += U"\\\\"; break;
      case '\b': out += U"\\b"; break;
      case '\f': out += U"\\f"; break;
      case '\n': out += U"\\n"; break;
      case '\r': out += U"\\r"; break;
      case '\t': out += U"\\t"; break;
      default:
        if (c < 0x20) {
          out += U"\\u";
          append_hex(out, c, 4);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace

const Value* Value::get(std::u32string_view key) const {
  if (type != Type::kDict) return nullptr;
  for (const Member& m : dict)
    if (m.key == key) return &m.value;
  return nullptr;
}

void Value::set(std::u32string key, Value v) {
  for (Member& m : dict) {
    if (m.key == key) {
      m.value = std::move(v);
      return;
    }
  }
  dict.push_back({std::move(key), std::move(v)});
}

bool Value::truthy() const {
  switch (type) {
    case Type::kNone: return false;
    case Type::kBool: return boolean;
    case Type::kInt: return int_digits != "0";
    case Type::kFloat: return number != 0.0;  // NaN is true
    case Type::kString: return !string.empty();
    case Type::kList: return !list.empty();
    case Type::kDict: return !dict.empty();
  }
  return false;
}

Loaded loads(std::u32string_view text) { return Parser(text).run(); }

std::u32string repr_float(double x) {
  if (std::isnan(x)) return U"nan";
  if (std::isinf(x)) return x > 0 ? U"inf" : U"-inf";
  if (x == 0) return std::signbit(x) ? U"-0.0" : U"0.0";
  // Shortest round-trip digits (as CPython's repr), then CPython's layout: positional when the
  // decimal point falls within -4 < decpt <= 16, else d.ddde+XX.
  char buf[64];
  const auto res =
      std::to_chars(buf, buf + sizeof(buf), std::fabs(x), std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits.push_back(sci[i]);
  const int exponent = std::stoi(sci.substr(e + 1));
  const int decpt = exponent + 1;
  std::string out = x < 0 ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    const int n = static_cast<int>(digits.size());
    if (decpt <= 0) {
      out += "0." + std::string(-decpt, '0') + digits;
    } else if (decpt >= n) {
      out += digits + std::string(decpt - n, '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int ex = decpt - 1;
    out += ex < 0 ? "e-" : "e+";
    const std::string mag = std::to_string(std::abs(ex));
    out += (mag.size() < 2 ? "0" : "") + mag;
  }
  return ascii(out);
}

std::u32string repr(const Value& v) {
  switch (v.type) {
    case Value::Type::kNone: return U"None";
    case Value::Type::kBool: return v.boolean ? U"True" : U"False";
    case Value::Type::kInt: return ascii(v.int_digits);
    case Value::Type::kFloat: return repr_float(v.number);
    case Value::Type::kString: return repr_string(v.string);
    case Value::Type::kList: {
      std::u32string out = U"[";
      for (size_t i = 0; i < v.list.size(); ++i) {
        if (i) out += U", ";
        out += repr(v.list[i]);
      }
      return out + U"]";
    }
    case Value::Type::kDict: {
      std::u32string out = U"{";
      for (size_t i = 0; i < v.dict.size(); ++i) {
        if (i) out += U", ";
        out += repr_string(v.dict[i].key) + U": " + repr(v.dict[i].value);
      }
      return out + U"}";
    }
  }
  return U"";
}

std::u32string str(const Value& v) { return v.is_string() ? v.string : repr(v); }

std::u32string dumps(const Value& v) {
  switch (v.type) {
    case Value::Type::kNone: return U"null";
    case Value::Type::kBool: return v.boolean ? U"true" : U"false";
    case Value::Type::kInt: return ascii(v.int_digits);
    case Value::Type::kFloat:
      if (std::isnan(v.number)) return U"NaN";
      if (std::isinf(v.number)) return v.number > 0 ? U"Infinity" : U"-Infinity";
      return repr_float(v.number);
    case Value::Type::kString: return dumps_string(v.string);
    case Value::Type::kList: {
      std::u32string out = U"[";
      for (size_t i = 0; i < v.list.size(); ++i) {
        if (i) out += U", ";
        out += dumps(v.list[i]);
      }
      return out + U"]";
    }
    case Value::Type::kDict: {
      std::u32string out = U"{";
      for (size_t i = 0; i < v.dict.size(); ++i) {
        if (i) out += U", ";
        out += dumps_string(v.dict[i].key) + U": " + dumps(v.dict[i].value);
      }
      return out + U"}";
    }
  }
  return U"";
}

}  // namespace avdit::models::text::pyjson
