// The chat-completions request body of a caption.
#include "pipeline/enhance/chat_request.h"

namespace avdit::pipeline::enhance {

nlohmann::ordered_json chat_request(const Task& task, std::string_view model,
                                    std::string_view prompt, std::string_view image_url,
                                    const Sampling& sampling, uint64_t seed,
                                    const ThinkingFields& fields) {
  using Json = nlohmann::ordered_json;
  // As the reference sends it: one user message, the filled template as a text part, and the
  // first frame as an image_url part for image-to-video.
  Json content = Json::array();
  content.push_back({{"type", "text"}, {"text", fill_template(task.text, prompt)}});
  if (!image_url.empty())
    content.push_back({{"type", "image_url"}, {"image_url", {{"url", std::string(image_url)}}}});
  Json body;
  body["model"] = std::string(model);
  body["messages"] = Json::array({{{"role", "user"}, {"content", std::move(content)}}});
  body["max_tokens"] = sampling.max_tokens;
  body["response_format"] = {
      {"type", "json_schema"},
      {"json_schema", {{"name", task.schema_name}, {"schema", task.schema}, {"strict", true}}}};
  body["seed"] = seed;
  if (sampling.temperature) body["temperature"] = *sampling.temperature;
  if (sampling.top_p) body["top_p"] = *sampling.top_p;
  if (!sampling.thinking) {
    if (fields.chat_template_kwargs) body["chat_template_kwargs"] = {{"enable_thinking", false}};
    if (fields.reasoning_effort) body["reasoning_effort"] = "low";
  }
  return body;
}

}  // namespace avdit::pipeline::enhance
