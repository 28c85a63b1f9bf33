// Python's json.loads / json.dumps and str() / repr() on the values they produce, to the character:
// MAGI-2's prompt handling (prompt_magi2.h) runs on them, and what it prints is what the text
// encoder sees. Strings are code points; surrogate code points are kept as Python keeps them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace avdit::models::text::pyjson {

struct Member;

struct Value {
  enum class Type { kNone, kBool, kInt, kFloat, kString, kList, kDict };
  Type type = Type::kNone;
  bool boolean = false;
  std::string int_digits;  // a Python int, as its decimal text ("-12")
  double number = 0;
  std::u32string string;
  std::vector<Value> list;
  std::vector<Member> dict;  // insertion order, keys unique

  bool is_dict() const { return type == Type::kDict; }
  bool is_list() const { return type == Type::kList; }
  bool is_string() const { return type == Type::kString; }
  // dict.get(key): nullptr when missing (or when this is not a dict).
  const Value* get(std::u32string_view key) const;
  // d[key] = v: replaces in place, or appends.
  void set(std::u32string key, Value v);
  // Python truthiness: None, False, 0, 0.0, "", [] and {} are false.
  bool truthy() const;
};

struct Member {
  std::u32string key;
  Value value;
};

enum class LoadError {
  kNone,
  kDecode,      // json.JSONDecodeError
  kIntTooLong,  // ValueError: an int of more than 4300 digits (Python's int-to-str limit)
  kTooDeep,     // RecursionError
};

struct Loaded {
  std::optional<Value> value;
  LoadError error = LoadError::kNone;
};

// json.loads(text): strict (no control characters in strings), NaN / Infinity accepted, duplicate
// keys keep the first position and the last value, lone \uD800-style escapes kept.
Loaded loads(std::u32string_view text);

std::u32string str(const Value& v);    // str(v): strings verbatim, the rest as repr
std::u32string repr(const Value& v);   // repr(v)
std::u32string repr_float(double x);   // float.__repr__
std::u32string dumps(const Value& v);  // json.dumps(v, ensure_ascii=False)

}  // namespace avdit::models::text::pyjson
