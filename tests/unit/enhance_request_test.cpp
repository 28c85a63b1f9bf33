// What the enhancer sends: the MAGI-2 reference's template and schemas byte for byte (SHA-256 of
// SandAI-org/MAGI-2-preview@f68a0f9's prompts/*.md and of pe_schemas.py's dicts as compact JSON),
// the template id, the filled message, the request's thinking switches, the endpoint URL and the
// image's data URL (RFC 4648 vectors).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/sha256.h"
#include "pipeline/enhance/chat_request.h"
#include "pipeline/enhance/endpoint.h"
#include "pipeline/enhance/image_url.h"
#include "pipeline/enhance/task.h"

namespace avdit::pipeline::enhance {
namespace {

using Json = nlohmann::ordered_json;

TEST(Task, TextsAreTheReferencesByteForByte) {
  // sha256sum of prompts/t2v.md and prompts/i2v.md at f68a0f9; the schemas as
  // json.dumps(T2V_RESPONSE_SCHEMA, separators=(",", ":"), ensure_ascii=False).
  const Task& t2v = task(TaskKind::kT2v);
  const Task& i2v = task(TaskKind::kI2v);
  EXPECT_EQ(sha256_hex(t2v.text),
            "7a8dd341e81f108ce5aaa9821a542c50023d0fd1a91f37ad75a8dd4f2bc7bae2");
  EXPECT_EQ(sha256_hex(i2v.text),
            "54b50f653edc7d4e32b4ac00af20eb640b269d09d95b35e45699676ef24e57e1");
  EXPECT_EQ(sha256_hex(std::string_view(t2v.schema.dump())),
            "efeb4c176b79e9b88bafbcb3049a4dd0d2191d61ca1bc4318a000fd69d14162a");
  EXPECT_EQ(sha256_hex(std::string_view(i2v.schema.dump())),
            "7fcf7485c2e3d36f13baa7539412c676fff7bac435933cc5280f5bda812c741a");
  EXPECT_EQ(t2v.schema_name, "T2VEnhanceResult");
  EXPECT_EQ(i2v.schema_name, "I2VEnhanceResult");
  EXPECT_EQ(t2v.required_keys, (std::vector<std::string>{"global_layer", "dynamic_layer"}));
  EXPECT_EQ(i2v.required_keys.size(), 6u);
  // The schema's own required list agrees with the keys a caption is checked for.
  for (const Task* t : {&t2v, &i2v})
    EXPECT_EQ(t->schema["required"].get<std::vector<std::string>>(), t->required_keys) << t->name;
}

TEST(Task, TemplateIdFollowsTheText) {
  const Task& t2v = task(TaskKind::kT2v);
  EXPECT_EQ(t2v.template_id.rfind("magi2-t2v-", 0), 0u) << t2v.template_id;
  EXPECT_EQ(t2v.template_id.size(), std::string("magi2-t2v-").size() + 16);
  EXPECT_EQ(template_id("t2v", t2v.text, t2v.schema), t2v.template_id);
  EXPECT_NE(task(TaskKind::kI2v).template_id, t2v.template_id);
  const std::string edited = std::string(t2v.text) + " ";
  EXPECT_NE(template_id("t2v", edited, t2v.schema), t2v.template_id);
  Json schema = t2v.schema;
  schema["required"].push_back("extra");
  EXPECT_NE(template_id("t2v", t2v.text, schema), t2v.template_id);
}

TEST(Task, FillTemplateReplacesAsTheReference) {
  const std::string filled = fill_template(task(TaskKind::kT2v).text, "a red fox in snow");
  EXPECT_NE(filled.find("User input:\na red fox in snow\n\nOptional variation seed:\n\n\n"),
            std::string::npos);
  EXPECT_EQ(filled.find("{user_input_text}"), std::string::npos);
  EXPECT_EQ(filled.find("{variation_seed}"), std::string::npos);
  // str.replace order: the prompt goes in first, then every {variation_seed} (its own too) goes.
  EXPECT_EQ(fill_template("[{user_input_text}|{variation_seed}]", "x{variation_seed}y"), "[xy|]");
  EXPECT_EQ(fill_template("{user_input_text}", "{user_input_text}"), "{user_input_text}");
}

TEST(ChatRequest, CarriesTheReferenceFieldsAndTheThinkingSwitches) {
  const Task& t2v = task(TaskKind::kT2v);
  Sampling s;
  Json body = chat_request(t2v, "qwen3", "a fox", "", s, 46, ThinkingFields{});
  EXPECT_EQ(body["model"], "qwen3");
  ASSERT_EQ(body["messages"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
  ASSERT_EQ(body["messages"][0]["content"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["content"][0]["text"], fill_template(t2v.text, "a fox"));
  EXPECT_EQ(body["max_tokens"], 16384);
  EXPECT_EQ(body["seed"], 46);
  EXPECT_EQ(body["response_format"]["type"], "json_schema");
  EXPECT_EQ(body["response_format"]["json_schema"]["name"], "T2VEnhanceResult");
  EXPECT_EQ(body["response_format"]["json_schema"]["strict"], true);
  EXPECT_EQ(body["response_format"]["json_schema"]["schema"], t2v.schema);
  EXPECT_EQ(body["chat_template_kwargs"]["enable_thinking"], false);
  EXPECT_EQ(body["reasoning_effort"], "low");
  EXPECT_FALSE(body.contains("temperature"));  // the reference leaves sampling to the server
  EXPECT_FALSE(body.contains("top_p"));

  ThinkingFields only_effort;
  only_effort.chat_template_kwargs = false;
  body = chat_request(t2v, "m", "a fox", "", s, 0, only_effort);
  EXPECT_FALSE(body.contains("chat_template_kwargs"));
  EXPECT_EQ(body["reasoning_effort"], "low");

  s.thinking = true;
  s.temperature = 0.7;
  s.top_p = 0.9;
  body = chat_request(t2v, "m", "a fox", "", s, 0, ThinkingFields{});
  EXPECT_FALSE(body.contains("chat_template_kwargs"));
  EXPECT_FALSE(body.contains("reasoning_effort"));
  EXPECT_EQ(body["temperature"], 0.7);
  EXPECT_EQ(body["top_p"], 0.9);

  body = chat_request(task(TaskKind::kI2v), "m", "a cat", "data:image/png;base64,AAAA", Sampling{},
                      0, ThinkingFields{});
  const Json& content = body["messages"][0]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[1]["type"], "image_url");
  EXPECT_EQ(content[1]["image_url"]["url"], "data:image/png;base64,AAAA");
  EXPECT_EQ(body["response_format"]["json_schema"]["name"], "I2VEnhanceResult");
}

TEST(Endpoint, BaseUrlsGetTheChatCompletionsPath) {
  EXPECT_EQ(parse_endpoint("http://127.0.0.1:8000/v1", "--url").url,
            "http://127.0.0.1:8000/v1/chat/completions");
  EXPECT_EQ(parse_endpoint("http://127.0.0.1:8000/v1/", "--url").url,
            "http://127.0.0.1:8000/v1/chat/completions");
  EXPECT_EQ(parse_endpoint("https://generativelanguage.googleapis.com/v1beta/openai/", "--url").url,
            "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions");
  EXPECT_EQ(parse_endpoint("http://h:1/v1/chat/completions", "--url").url,
            "http://h:1/v1/chat/completions");
  EXPECT_EQ(parse_endpoint("http://h", "--url").url, "http://h/chat/completions");
  const Endpoint e = parse_endpoint("https://user:secret@h.example/v1", "--url");
  EXPECT_EQ(e.url, "https://user:secret@h.example/v1/chat/completions");
  EXPECT_EQ(e.shown, "https://h.example/v1/chat/completions");
  for (const char* bad :
       {"127.0.0.1:8000/v1", "ftp://h/v1", "http://", "http:///v1", "http://h/v1?key=1"}) {
    try {
      parse_endpoint(bad, "--url");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const BadInput& err) {
      EXPECT_NE(std::string(err.what()).find("--url"), std::string::npos) << err.what();
    }
  }
}

TEST(ImageUrl, Rfc4648VectorsAndMimeTypes) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foob"), "Zm9vYg==");
  EXPECT_EQ(base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64(std::string("\xff\xfe\x00", 3)), "//4A");
  const auto dir = std::filesystem::temp_directory_path() / "avdit_enhance_image_test";
  std::filesystem::create_directories(dir);
  for (const auto& [name, mime] :
       {std::pair{"a.PNG", "image/png"}, std::pair{"a.webp", "image/webp"},
        std::pair{"a.jpeg", "image/jpeg"}, std::pair{"a", "image/jpeg"}}) {
    std::ofstream(dir / name, std::ios::binary) << "foobar";
    const ImageUrl u = image_data_url(dir / name);
    EXPECT_EQ(u.url, std::string("data:") + mime + ";base64,Zm9vYmFy") << name;
    EXPECT_EQ(u.sha256, sha256_hex(std::string_view("foobar")));
  }
  EXPECT_THROW(image_data_url(dir / "missing.png"), BadInput);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace avdit::pipeline::enhance
