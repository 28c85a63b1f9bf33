// The caption Markdown against the MAGI-2 reference's renderer (goldens in
// tests/fixtures/enhance, made by pe_markdown.render_markdown with enhancer.py's settings), and
// Python's float spelling against values printed by Python's repr().
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "pipeline/enhance/caption_markdown.h"

namespace avdit::pipeline::enhance {
namespace {

std::string read(const std::string& name) {
  std::ifstream f(std::string(AVDIT_SOURCE_DIR) + "/tests/fixtures/enhance/" + name,
                  std::ios::binary);
  EXPECT_TRUE(f.good()) << name;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class Golden : public ::testing::TestWithParam<const char*> {};

TEST_P(Golden, MatchesTheReferenceRendererByteForByte) {
  const std::string name = GetParam();
  const auto caption = nlohmann::ordered_json::parse(read(name + ".json"));
  const std::string want = read(name + ".md");
  const std::string got = render_caption_markdown(caption);
  ASSERT_FALSE(want.empty());
  if (got != want) {  // the first differing line, for a readable failure
    std::istringstream a(got), b(want);
    std::string la, lb;
    for (int line = 1; std::getline(a, la) && std::getline(b, lb); ++line)
      ASSERT_EQ(la, lb) << name << ".md line " << line;
  }
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden,
                         ::testing::Values("t2v_caption", "i2v_caption", "edge_caption"));

TEST(CaptionMarkdown, EmptyAndScalarCaptions) {
  EXPECT_EQ(render_caption_markdown(nlohmann::ordered_json::parse(R"({"a": {"b": ["", null]}})")),
            "");
  // A top-level scalar is a key:value line, not a heading (the reference prints 'a:x\n').
  EXPECT_EQ(render_caption_markdown(nlohmann::ordered_json::parse(R"({"a": "x"})")), "a:x\n");
}

TEST(PythonFloatRepr, AgreesWithPythonRepr) {
  // (value, repr(value)) pairs printed by CPython 3.11.
  const std::pair<double, const char*> cases[] = {
      {10.0, "10.0"},
      {0.1, "0.1"},
      {1.0 / 3.0, "0.3333333333333333"},
      {1e-05, "1e-05"},
      {0.0001, "0.0001"},
      {0.001, "0.001"},
      {1e16, "1e+16"},
      {1234567890123456.0, "1234567890123456.0"},
      {123456789012345678.0, "1.2345678901234568e+17"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {-0.0, "-0.0"},
      {-2.5e-300, "-2.5e-300"},
      {100000.0, "100000.0"},
      {12.5, "12.5"},
  };
  for (const auto& [v, want] : cases) EXPECT_EQ(python_float_repr(v), want) << want;
}

}  // namespace
}  // namespace avdit::pipeline::enhance
