// Where the enhancer's requests go: the chat-completions URL from what a user passes (a base URL
// such as http://host:8000/v1, as OpenAI clients take, or the full .../chat/completions), the form
// of it that is safe to print, and the API key from the environment.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace avdit::pipeline::enhance {

struct Endpoint {
  std::string url;    // what is requested
  std::string shown;  // the same without user:password@, for messages and the JSON output
};

// BadInput (naming `option`) unless the URL is http:// or https:// with a host.
Endpoint parse_endpoint(std::string_view url, std::string_view option);

// AVDIT_ENHANCE_API_KEY when set and non-empty, else OPENAI_API_KEY, else nothing (a local server
// needs none). The key goes into the Authorization header only; it is never logged or cached.
std::optional<std::string> api_key_from_env();

}  // namespace avdit::pipeline::enhance
