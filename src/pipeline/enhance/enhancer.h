// The MAGI-2 prompt enhancer: a user's prompt in, the structured caption the model was trained on
// out, from an OpenAI-compatible chat-completions server. Thinking is switched off unless asked
// for, bad answers and server errors are retried within a bounded count and time, and captions are
// cached on disk. `avdit enhance` and the pipeline's --enhance both call enhance().
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/enhance/chat_request.h"

namespace avdit::pipeline::enhance {

struct RetryPolicy {
  int attempts = 4;  // requests at most
  double connect_timeout_s = 10;
  double timeout_s = 180;     // one request, as the reference's client
  double max_time_s = 600;    // every attempt and wait together
  double backoff_s = 1;       // the wait before the second attempt, doubled after each failure
  double max_backoff_s = 30;  // (a server's Retry-After is followed instead, within max_time_s)
};

struct EnhanceOptions {
  std::string url;                       // a base URL (.../v1) or the full .../chat/completions
  std::string url_option = "--enhance";  // the option it came from, named in messages
  std::string model;
  Sampling sampling;
  RetryPolicy retry;
  bool optional = false;  // when the enhancer fails: warn and go on with the raw prompt
  std::optional<std::filesystem::path> cache_dir;  // nullopt: no cache
};

struct EnhanceRequest {
  std::string prompt;                          // UTF-8
  uint64_t seed = 0;                           // below 2^63 (servers take a signed 64-bit seed)
  std::optional<std::filesystem::path> image;  // a first frame: the image-to-video task
};

struct Attempt {
  uint64_t seed;        // the seed sent: the request's, plus one per earlier unusable answer
  std::string outcome;  // "caption" or why the attempt gave none
  double seconds;
};

struct EnhanceResult {
  std::string caption;            // the Markdown caption; the raw prompt when !enhanced
  nlohmann::ordered_json fields;  // the caption's JSON (null when !enhanced)
  bool enhanced = false;
  bool from_cache = false;
  std::vector<Attempt> attempts;  // the requests this call made (none on a cache hit)
  std::string task;               // "t2v" | "i2v"
  std::string template_id;
  std::string endpoint;    // the URL, without credentials
  std::string cache_file;  // where the caption is cached ("" when it is not)
  std::string failure;     // why there is no caption, when `optional` let the run go on
};

// Throws BadInput (exit 2) for bad options, an unreadable image, an unreachable endpoint or a
// request the server refuses (4xx), and RuntimeFailure (exit 1) when every attempt failed; with
// options.optional the last two become a warning and the raw prompt.
EnhanceResult enhance(const EnhanceRequest& request, const EnhanceOptions& options);

}  // namespace avdit::pipeline::enhance
