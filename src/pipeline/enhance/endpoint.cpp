// The enhancer endpoint's URL and API key.
#include "pipeline/enhance/endpoint.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace avdit::pipeline::enhance {

Endpoint parse_endpoint(std::string_view url, std::string_view option) {
  const auto scheme_end = url.find("://");
  const std::string_view scheme =
      scheme_end == std::string_view::npos ? "" : url.substr(0, scheme_end);
  AVDIT_REQUIRE(scheme == "http" || scheme == "https",
                "{} '{}' is not an http:// or https:// URL: give the server's OpenAI-compatible "
                "base URL, e.g. http://127.0.0.1:8000/v1",
                option, url);
  const size_t authority = scheme_end + 3;
  const size_t path = std::min(url.find_first_of("/?#", authority), url.size());
  std::string_view host = url.substr(authority, path - authority);
  const auto at = host.rfind('@');
  const std::string_view userinfo = at == std::string_view::npos ? "" : host.substr(0, at + 1);
  host = host.substr(userinfo.size());
  AVDIT_REQUIRE(!host.empty() && host.front() != ':',
                "{} '{}' names no host: give the server's OpenAI-compatible base URL, e.g. "
                "http://127.0.0.1:8000/v1",
                option, url);
  AVDIT_REQUIRE(url.find_first_of("?#", authority) == std::string_view::npos,
                "{} '{}' has a query or fragment: give the base URL alone (e.g. "
                "http://127.0.0.1:8000/v1)",
                option, url);
  std::string full(url);
  constexpr std::string_view kSuffix = "/chat/completions";
  const bool has_suffix = full.size() >= kSuffix.size() &&
                          full.compare(full.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
  if (!has_suffix) {
    while (full.size() > authority + host.size() + userinfo.size() && full.back() == '/')
      full.pop_back();
    full += kSuffix;
  }
  Endpoint e;
  e.url = full;
  e.shown = full;
  if (!userinfo.empty()) e.shown.erase(authority, userinfo.size());
  return e;
}

std::optional<std::string> api_key_from_env() {
  for (const char* name : {"AVDIT_ENHANCE_API_KEY", "OPENAI_API_KEY"}) {
    const char* v = std::getenv(name);
    if (v && *v) return std::string(v);
  }
  return std::nullopt;
}

}  // namespace avdit::pipeline::enhance
