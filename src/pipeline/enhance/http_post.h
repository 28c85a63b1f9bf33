// One HTTP POST of a JSON body with connect and total timeouts: the transport under the enhancer.
// Built on libcurl (http_post_curl.cpp); a build without libcurl gets http_post_none.cpp, whose
// http_post says so.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace avdit::pipeline::enhance {

struct HttpRequest {
  std::string url;
  std::string body;                  // JSON
  std::vector<std::string> headers;  // "Name: value", beside Content-Type: application/json
  double connect_timeout_s = 10;
  double timeout_s = 180;  // the whole exchange
};

enum class Transport {
  kOk,              // an HTTP answer came back (any status)
  kUnreachable,     // no connection: refused, unknown host, no route
  kConnectTimeout,  // no connection within connect_timeout_s
  kTimeout,         // connected, but no complete answer within timeout_s
  kFailed,          // any other transport failure (reset, TLS, a malformed answer)
};

struct HttpResponse {
  Transport transport = Transport::kFailed;
  std::string error;  // the transport failure in words
  long status = 0;    // HTTP status when transport == kOk
  std::string body;
  std::optional<double> retry_after_s;  // the Retry-After header, in seconds from now
};

// Why this build cannot make requests; "" when it can.
std::string http_unavailable_reason();

HttpResponse http_post(const HttpRequest& request);

}  // namespace avdit::pipeline::enhance
