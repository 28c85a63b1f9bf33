// http_post on libcurl's easy interface: one handle per request, no signals (so timeouts work in
// any thread), no redirects followed (a POST must reach the URL given), the answer capped in size.
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <memory>
#include <mutex>
#include <string_view>

#include "core/error.h"
#include "pipeline/enhance/http_post.h"

namespace avdit::pipeline::enhance {

namespace {

constexpr size_t kMaxBody = 64u << 20;  // a caption is tens of kB; anything near this is wrong

struct Sink {
  std::string body;
  std::optional<double> retry_after_s;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t n = size * count;
  if (sink->body.size() + n > kMaxBody) return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  sink->body.append(data, n);
  return n;
}

// Retry-After: delta-seconds or an HTTP date (RFC 9110 10.2.3).
size_t on_header(char* data, size_t size, size_t count, void* user) {
  const size_t n = size * count;
  std::string_view line(data, n);
  constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size()) {
    bool match = true;
    for (size_t i = 0; i < kName.size() && match; ++i)
      match = std::tolower(static_cast<unsigned char>(line[i])) == kName[i];
    if (match) {
      std::string value(line.substr(kName.size()));
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
        value.pop_back();
      const auto first = value.find_first_not_of(" \t");
      value = first == std::string::npos ? "" : value.substr(first);
      auto* sink = static_cast<Sink*>(user);
      if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos) {
        sink->retry_after_s = std::stod(value);
      } else if (const time_t when = curl_getdate(value.c_str(), nullptr); when > 0) {
        sink->retry_after_s = std::max(0.0, std::difftime(when, std::time(nullptr)));
      }
    }
  }
  return n;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

std::string http_unavailable_reason() { return ""; }

HttpResponse http_post(const HttpRequest& request) {
  global_init();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  AVDIT_CHECK(curl, "curl_easy_init failed");
  // libcurl's default "Expect: 100-continue" on large POST bodies costs a round trip (or a one
  // second wait on servers that ignore it); the template makes every body large.
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Expect:");
  for (const auto& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers,
                                                                          curl_slist_free_all);
  Sink sink;
  char error[CURL_ERROR_SIZE] = {};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  // At least 1 ms each: libcurl reads 0 as "no limit".
  auto ms = [](double s) { return std::max(1L, static_cast<long>(std::ceil(s * 1000))); };
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms(request.connect_timeout_s));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms(request.timeout_s));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "avdit-enhance");

  const CURLcode rc = curl_easy_perform(c);
  HttpResponse r;
  r.error = error[0] ? error : curl_easy_strerror(rc);
  switch (rc) {
    case CURLE_OK:
      r.transport = Transport::kOk;
      r.error.clear();
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
      r.body = std::move(sink.body);
      r.retry_after_s = sink.retry_after_s;
      return r;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT: r.transport = Transport::kUnreachable; return r;
    case CURLE_OPERATION_TIMEDOUT: {
      curl_off_t connect_us = 0;
      curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connect_us);
      r.transport = connect_us == 0 ? Transport::kConnectTimeout : Transport::kTimeout;
      return r;
    }
    case CURLE_WRITE_ERROR:
      r.transport = Transport::kFailed;
      r.error = fmt::format("the answer exceeds {} MiB", kMaxBody >> 20);
      return r;
    default: r.transport = Transport::kFailed; return r;
  }
}

}  // namespace avdit::pipeline::enhance
