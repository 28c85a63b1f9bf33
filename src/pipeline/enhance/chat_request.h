// The body of one chat-completions request for a caption: the reference's message and
// response_format, the sampling settings, the seed, and the switches that keep a reasoning model
// from spending the token budget on thoughts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "pipeline/enhance/task.h"

namespace avdit::pipeline::enhance {

// What the model samples with. The reference sets only max_tokens (16384), leaving temperature and
// top_p to the server; the values here are part of the caption cache's key.
struct Sampling {
  std::optional<double> temperature;
  std::optional<double> top_p;
  int max_tokens = 16384;
  bool thinking = false;  // false: ask the server to skip the reasoning phase
};

// Which thinking switches the server is sent. Both by default; a server that rejects one (HTTP
// 400 naming it) gets the request again without it.
struct ThinkingFields {
  bool chat_template_kwargs = true;  // {"enable_thinking": false}: Qwen3-style chat templates
  bool reasoning_effort = true;      // "low": OpenAI-style reasoning models
};

// image_url: a data URL (image_url.h) for the image-to-video task, else empty.
nlohmann::ordered_json chat_request(const Task& task, std::string_view model,
                                    std::string_view prompt, std::string_view image_url,
                                    const Sampling& sampling, uint64_t seed,
                                    const ThinkingFields& fields);

}  // namespace avdit::pipeline::enhance
