// Reading chat completions: thinking blocks removed (closed, unterminated, opened by the chat
// template), reasoning_content ignored, the caption JSON found (bare or fenced) and checked for
// the task's required keys, each failure given as a reason.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pipeline/enhance/answer.h"

namespace avdit::pipeline::enhance {
namespace {

using Json = nlohmann::ordered_json;

std::string fixture(const std::string& name) {
  std::ifstream f(std::string(AVDIT_SOURCE_DIR) + "/tests/fixtures/enhance/" + name,
                  std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(StripThinking, RemovesEveryForm) {
  EXPECT_EQ(strip_thinking(R"({"a": 1})"), R"({"a": 1})");
  EXPECT_EQ(strip_thinking("<think>plan the shot</think>\n\n{\"a\": 1}\n"), R"({"a": 1})");
  EXPECT_EQ(strip_thinking("<think>one</think>{\"a\":<think>two</think> 1}"), R"({"a": 1})");
  // Cut off while thinking: nothing is left.
  EXPECT_EQ(strip_thinking("<think>first I will consider the lighthouse and"), "");
  EXPECT_EQ(strip_thinking("{\"a\": 1}\n<think>an afterthought that never ends"), R"({"a": 1})");
  // The chat template opened the block, so only its end is in the answer.
  EXPECT_EQ(strip_thinking("the user wants a fox</think>\n{\"a\": 1}"), R"({"a": 1})");
  EXPECT_EQ(strip_thinking("a</think>b</think>{\"a\": 1}"), R"({"a": 1})");
  EXPECT_EQ(strip_thinking("   \n"), "");
}

TEST(ParseCompletion, ReadsContentAndFinishReasonOnly) {
  std::string why;
  auto c =
      parse_completion(R"({"choices":[{"index":0,"message":{"role":"assistant","content":"{}",)"
                       R"("reasoning_content":"long thoughts"},"finish_reason":"stop"}]})",
                       &why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->content, "{}");
  EXPECT_EQ(c->finish_reason, "stop");
  // A reasoning model out of budget: no content, the thoughts elsewhere, which are not used.
  c = parse_completion(
      R"({"choices":[{"message":{"content":null,"reasoning_content":"{\"global_layer\":{}}"},)"
      R"("finish_reason":"length"}]})",
      &why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->content, "");
  EXPECT_EQ(c->finish_reason, "length");
  EXPECT_FALSE(parse_completion("<html>502 Bad Gateway</html>", &why));
  EXPECT_NE(why.find("not JSON"), std::string::npos) << why;
  EXPECT_FALSE(parse_completion(R"({"choices": []})", &why));
  EXPECT_NE(why.find("choices[0]"), std::string::npos) << why;
}

TEST(ParseCaption, AcceptsBareAndFencedJsonWithTheRequiredKeys) {
  const std::string t2v = fixture("t2v_caption.json");
  std::string why;
  auto c = parse_caption(t2v, task(TaskKind::kT2v), &why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->fields, Json::parse(t2v));
  EXPECT_EQ(c->markdown, fixture("t2v_caption.md"));
  auto fenced = parse_caption("```json\n" + t2v + "\n```", task(TaskKind::kT2v), &why);
  ASSERT_TRUE(fenced) << why;
  EXPECT_EQ(fenced->markdown, c->markdown);
  auto i2v = parse_caption(fixture("i2v_caption.json"), task(TaskKind::kI2v), &why);
  ASSERT_TRUE(i2v) << why;
  EXPECT_EQ(i2v->markdown, fixture("i2v_caption.md"));
}

TEST(ParseCaption, GivesAReasonForEveryUnusableAnswer) {
  const Task& t2v = task(TaskKind::kT2v);
  std::string why;
  EXPECT_FALSE(parse_caption("", t2v, &why));
  EXPECT_NE(why.find("empty"), std::string::npos) << why;
  // Truncated JSON, as a model cut at max_tokens leaves it.
  EXPECT_FALSE(parse_caption(R"({"global_layer": {"context": "A lighthou)", t2v, &why));
  EXPECT_NE(why.find("not valid JSON"), std::string::npos) << why;
  EXPECT_FALSE(parse_caption(R"(["global_layer", "dynamic_layer"])", t2v, &why));
  EXPECT_NE(why.find("not an object"), std::string::npos) << why;
  EXPECT_FALSE(parse_caption(R"({"global_layer": {}})", t2v, &why));
  EXPECT_NE(why.find("dynamic_layer"), std::string::npos) << why;
  // The text-to-video caption is not an image-to-video one.
  EXPECT_FALSE(parse_caption(fixture("t2v_caption.json"), task(TaskKind::kI2v), &why));
  EXPECT_NE(why.find("global_caption"), std::string::npos) << why;
}

}  // namespace
}  // namespace avdit::pipeline::enhance
