// Reading an OpenAI-style chat completion: the answer's text with any thinking removed, and the
// caption JSON inside it checked against the task. Each failure comes back as a short reason (the
// enhancer retries on it), never as an exception.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "pipeline/enhance/task.h"

namespace avdit::pipeline::enhance {

struct Completion {
  std::string content;        // choices[0].message.content ("" when null or absent)
  std::string finish_reason;  // "stop", "length", ... ("" when absent)
};

// choices[0] of a chat.completion body. reasoning_content (a reasoning model's thoughts) is not
// read. nullopt and *why when the body is not a chat completion.
std::optional<Completion> parse_completion(std::string_view body, std::string* why);

// The text with every <think>...</think> block removed, an unterminated <think> cut to the end,
// and anything before a closing </think> that has no opening tag (templates that open the block
// in the prompt) removed; then trimmed.
std::string strip_thinking(std::string_view content);

struct Caption {
  nlohmann::ordered_json fields;  // the parsed JSON object
  std::string markdown;           // what the pipeline is given (caption_markdown.h)
};

// The caption of an answer's text (already stripped of thinking): one JSON object, optionally in a
// ``` fence, holding the task's required keys. nullopt and *why otherwise.
std::optional<Caption> parse_caption(std::string_view text, const Task& task, std::string* why);

}  // namespace avdit::pipeline::enhance
