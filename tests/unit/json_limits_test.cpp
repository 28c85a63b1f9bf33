// Depth-limited JSON parsing (core/json_limits.h): nesting is counted outside strings only, the
// limit holds exactly, and errors name the file.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/json_limits.h"

namespace avdit {
namespace {

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonLimits, DepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(json_depth("{}"), 1);
  EXPECT_EQ(json_depth(R"({"a": [1, {"b": [[2]]}]})"), 5);
  EXPECT_EQ(json_depth(R"({"a": "[[[[{{{{"})"), 1);
  EXPECT_EQ(json_depth(R"({"a": "\"[[[", "b": [1]})"),
            2);                                  // an escaped quote does not end the string
  EXPECT_EQ(json_depth(R"(["\\", [[1]]])"), 3);  // an escaped backslash does
  EXPECT_EQ(json_depth("42"), 0);
}

TEST(JsonLimits, TheLimitIsExact) {
  EXPECT_NO_THROW(parse_json(nested(kMaxJsonDepth), "f.json"));
  try {
    parse_json(nested(kMaxJsonDepth + 1), "f.json");
    FAIL() << "expected BadInput";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("f.json: JSON nested deeper than 64"), std::string::npos)
        << e.what();
  }
}

TEST(JsonLimits, AMillionBracketsAreRefusedWithoutRecursion) {
  EXPECT_THROW(parse_json(std::string(1'000'000, '['), "deep.json"), BadInput);
  EXPECT_THROW(parse_json(nested(1'000'000), "deep.json"), BadInput);
}

TEST(JsonLimits, MalformedAndOutOfRangeNameTheFile) {
  for (const char* text : {"{", "{\"a\": 1e99999}", "[1, 2,]", ""}) {
    try {
      parse_json(text, "cfg.json");
      FAIL() << "expected BadInput for " << text;
    } catch (const BadInput& e) {
      EXPECT_EQ(std::string(e.what()).rfind("cfg.json: malformed JSON", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace avdit
