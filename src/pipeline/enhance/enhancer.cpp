// The enhancer's request loop: cache lookup, attempts with backoff, the classification of every
// failure into "retry", "the user must fix something" (BadInput) or "gave up" (RuntimeFailure).
#include "pipeline/enhance/enhancer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "pipeline/enhance/answer.h"
#include "pipeline/enhance/caption_cache.h"
#include "pipeline/enhance/endpoint.h"
#include "pipeline/enhance/http_post.h"
#include "pipeline/enhance/image_url.h"

namespace avdit::pipeline::enhance {

namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// Why no caption came back: a message for the user and the exit code it deserves.
struct Failure {
  bool bad_input;
  std::string message;
};

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The server's own words from an error body: OpenAI's {"error": {"message"}}, vLLM's
// {"message"}, or the start of the body.
std::string server_message(const std::string& body) {
  std::string m;
  try {
    const Json j = Json::parse(body);
    if (j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
        j["error"]["message"].is_string())
      m = j["error"]["message"].get<std::string>();
    else if (j.contains("error") && j["error"].is_string())
      m = j["error"].get<std::string>();
    else if (j.contains("message") && j["message"].is_string())
      m = j["message"].get<std::string>();
  } catch (const Json::exception&) {
  }
  if (m.empty()) m = body;
  for (char& c : m)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return m.size() > 160 ? m.substr(0, 160) + "..." : m;
}

bool retryable_status(long status) { return status == 408 || status == 429 || status >= 500; }

std::string fmt_seconds(double s) { return fmt::format("{:.3g} s", s); }

void check_options(const EnhanceRequest& rq, const EnhanceOptions& o) {
  const RetryPolicy& r = o.retry;
  AVDIT_REQUIRE(!o.model.empty(), "the enhancer needs a model name (--enhance-model / --model)");
  AVDIT_REQUIRE(r.attempts >= 1 && r.attempts <= 100, "--enhance-attempts is {}: give 1 to 100",
                r.attempts);
  AVDIT_REQUIRE(r.connect_timeout_s > 0 && r.timeout_s > 0 && r.max_time_s > 0,
                "the enhancer's timeouts must be positive (--enhance-connect-timeout {}, "
                "--enhance-timeout {}, --enhance-max-time {})",
                r.connect_timeout_s, r.timeout_s, r.max_time_s);
  AVDIT_REQUIRE(r.backoff_s >= 0 && r.max_backoff_s >= 0, "--enhance-backoff must be >= 0, not {}",
                r.backoff_s);
  const Sampling& s = o.sampling;
  AVDIT_REQUIRE(s.max_tokens >= 1, "--enhance-max-tokens is {}: give a positive count",
                s.max_tokens);
  AVDIT_REQUIRE(!s.temperature || (*s.temperature >= 0 && *s.temperature <= 2),
                "--enhance-temperature is {}: give 0 to 2", s.temperature.value_or(0));
  AVDIT_REQUIRE(!s.top_p || (*s.top_p > 0 && *s.top_p <= 1), "--enhance-top-p is {}: give (0, 1]",
                s.top_p.value_or(0));
  AVDIT_REQUIRE(!rq.prompt.empty(), "the prompt to enhance is empty: give the prompt");
  AVDIT_REQUIRE(rq.seed <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - 1000),
                "the enhancer's seed {} is too large: servers take a signed 64-bit seed, give one "
                "below 2^63",
                rq.seed);
  try {
    (void)Json(rq.prompt).dump();
  } catch (const Json::exception&) {
    throw BadInput("the prompt to enhance is not valid UTF-8: give the prompt as UTF-8 text");
  }
}

class Session {
 public:
  Session(const EnhanceRequest& rq, const EnhanceOptions& o, const Task& task, Endpoint endpoint,
          std::string image_url, EnhanceResult& result)
      : rq_(rq),
        o_(o),
        task_(task),
        endpoint_(std::move(endpoint)),
        image_url_(std::move(image_url)),
        result_(result),
        key_(api_key_from_env()) {}

  // A caption in result_, or the reason there is none.
  std::optional<Failure> run() {
    if (const std::string why = http_unavailable_reason(); !why.empty()) return Failure{true, why};
    const auto t0 = Clock::now();
    const RetryPolicy& r = o_.retry;
    std::string last;
    bool every_failure_connect = true;
    int content_failures = 0;
    for (int n = 1; n <= r.attempts; ++n) {
      const double left = r.max_time_s - since(t0);
      if (n > 1 && left < 0.01) {
        last += fmt::format("; --enhance-max-time {} is spent", fmt_seconds(r.max_time_s));
        break;
      }
      const uint64_t seed = rq_.seed + content_failures;
      HttpRequest req;
      req.url = endpoint_.url;
      req.body =
          chat_request(task_, o_.model, rq_.prompt, image_url_, o_.sampling, seed, fields_).dump();
      if (key_) req.headers.push_back("Authorization: Bearer " + *key_);
      req.connect_timeout_s = std::min(r.connect_timeout_s, left);
      req.timeout_s = std::min(r.timeout_s, left);
      log::debug("enhance: attempt {}/{}: POST {} ({} bytes, seed {})", n, r.attempts,
                 endpoint_.shown, req.body.size(), seed);
      const auto ta = Clock::now();
      const HttpResponse resp = http_post(req);
      Step step = judge(resp, req);
      result_.attempts.push_back({seed, step.caption ? "caption" : step.reason, since(ta)});
      if (step.caption) {
        finish(std::move(*step.caption), step.answer);
        return std::nullopt;
      }
      if (step.fatal) return step.fatal;
      every_failure_connect = every_failure_connect && step.connect;
      if (step.content) ++content_failures;
      last = step.reason;
      if (n == r.attempts) break;
      double wait =
          step.immediate ? 0 : std::min(r.backoff_s * std::pow(2.0, n - 1), r.max_backoff_s);
      if (resp.retry_after_s) wait = *resp.retry_after_s;
      if (since(t0) + wait >= r.max_time_s) {
        last += fmt::format("; the next attempt (after {}) would pass --enhance-max-time {}",
                            fmt_seconds(wait), fmt_seconds(r.max_time_s));
        break;
      }
      log::warn("enhance: attempt {}/{} failed: {}; retrying in {}", n, r.attempts, step.reason,
                fmt_seconds(wait));
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
    const size_t made = result_.attempts.size();
    if (every_failure_connect)
      return Failure{true, fmt::format("enhancer endpoint {} is unreachable: {} in {} attempt(s); "
                                       "start the server or fix {}{}",
                                       endpoint_.shown, last, made, o_.url_option, or_optional())};
    return Failure{
        false,
        fmt::format("enhancer {} (model {}) gave no usable caption in {} attempt(s) over "
                    "{}; the last: {}. Try again or raise --enhance-attempts or "
                    "--enhance-timeout{}",
                    endpoint_.shown, o_.model, made, fmt_seconds(since(t0)), last, or_optional())};
  }

 private:
  // What one request gave.
  struct Step {
    std::optional<Caption> caption;
    std::string answer;            // the model's text, thinking removed
    std::string reason;            // why there is no caption
    std::optional<Failure> fatal;  // no retry can help
    bool connect = false;          // no connection was made
    bool content = false;          // the model answered, unusably: retry with the next seed
    bool immediate = false;        // retry at once (the request itself was changed)
  };

  Step judge(const HttpResponse& resp, const HttpRequest& req) {
    Step s;
    switch (resp.transport) {
      case Transport::kUnreachable:
        s.fatal =
            Failure{true, fmt::format("enhancer endpoint {} is unreachable ({}): start the "
                                      "server or fix {}{}",
                                      endpoint_.shown, resp.error, o_.url_option, or_optional())};
        return s;
      case Transport::kConnectTimeout:
        s.connect = true;
        s.reason = fmt::format("no connection within {} ({})", fmt_seconds(req.connect_timeout_s),
                               resp.error);
        return s;
      case Transport::kTimeout:
        s.reason = fmt::format("no complete answer within {}", fmt_seconds(req.timeout_s));
        return s;
      case Transport::kFailed: s.reason = resp.error; return s;
      case Transport::kOk: break;
    }
    if (resp.status < 200 || resp.status >= 300) {
      const std::string msg = server_message(resp.body);
      s.reason = msg.empty() ? fmt::format("HTTP {}", resp.status)
                             : fmt::format("HTTP {} ({})", resp.status, msg);
      if (retryable_status(resp.status)) return s;
      if (drop_rejected_field(resp)) {
        s.immediate = true;
        return s;
      }
      const char* hint = resp.status == 401 || resp.status == 403
                             ? "set the API key in OPENAI_API_KEY or AVDIT_ENHANCE_API_KEY"
                         : resp.status == 404
                             ? "check the URL (an OpenAI-compatible base such as .../v1) and the "
                               "model name"
                             : "check the URL and the model name";
      s.fatal =
          Failure{true, fmt::format("enhancer {} refused the request for model {}: {}; {}{}",
                                    endpoint_.shown, o_.model, s.reason, hint, or_optional())};
      return s;
    }
    std::string why;
    const auto completion = parse_completion(resp.body, &why);
    if (!completion) {
      s.reason = why;
      return s;
    }
    s.content = true;
    s.answer = strip_thinking(completion->content);
    if (completion->finish_reason == "length") {
      s.reason = fmt::format("the answer was cut at max_tokens {} (finish_reason \"length\"){}",
                             o_.sampling.max_tokens,
                             s.answer.empty() ? " before any caption: thinking may have used "
                                                "the budget"
                                              : "");
      return s;
    }
    s.caption = parse_caption(s.answer, task_, &why);
    if (!s.caption) s.reason = why;
    return s;
  }

  // A server that does not know a thinking switch says so with a 400 naming it: send the request
  // again without it. Returns whether a field was dropped.
  bool drop_rejected_field(const HttpResponse& resp) {
    if (o_.sampling.thinking || (resp.status != 400 && resp.status != 422)) return false;
    bool dropped = false;
    for (auto [name, sent] : {std::pair{"chat_template_kwargs", &fields_.chat_template_kwargs},
                              std::pair{"reasoning_effort", &fields_.reasoning_effort}}) {
      if (*sent && resp.body.find(name) != std::string::npos) {
        *sent = false;
        dropped = true;
        log::warn("enhance: {} rejects '{}'; asking again without it", endpoint_.shown, name);
      }
    }
    return dropped;
  }

  // The way out that a failure's message offers, unless it was taken already.
  std::string or_optional() const {
    return o_.optional ? "" : ", or pass --enhance-optional to continue with the raw prompt";
  }

  void finish(Caption caption, const std::string& answer) {
    result_.enhanced = true;
    result_.caption = std::move(caption.markdown);
    result_.fields = std::move(caption.fields);
    answer_ = answer;
  }

 public:
  const std::string& answer() const { return answer_; }

 private:
  const EnhanceRequest& rq_;
  const EnhanceOptions& o_;
  const Task& task_;
  Endpoint endpoint_;
  std::string image_url_;
  EnhanceResult& result_;
  std::optional<std::string> key_;
  ThinkingFields fields_;
  std::string answer_;
};

}  // namespace

EnhanceResult enhance(const EnhanceRequest& request, const EnhanceOptions& options) {
  check_options(request, options);
  Endpoint endpoint = parse_endpoint(options.url, options.url_option);
  const Task& t = task(request.image ? TaskKind::kI2v : TaskKind::kT2v);
  ImageUrl image;
  if (request.image) image = image_data_url(*request.image);

  EnhanceResult result;
  result.task = t.name;
  result.template_id = t.template_id;
  result.endpoint = endpoint.shown;
  const CacheKey key = cache_key(request.prompt, image.sha256, options.model, t.template_id,
                                 request.seed, options.sampling);
  std::optional<CaptionCache> cache;
  if (options.cache_dir) cache.emplace(*options.cache_dir);
  if (cache) {
    if (auto hit = cache->load(key)) {
      result.caption = std::move(hit->caption);
      result.fields = std::move(hit->fields);
      result.enhanced = result.from_cache = true;
      result.cache_file = cache->file(key).string();
      log::info("enhance: caption from the cache ({})", result.cache_file);
      return result;
    }
  }
  log::info("enhance: asking {} at {} ({} template {}, seed {}, thinking {})", options.model,
            endpoint.shown, t.name, t.template_id, request.seed,
            options.sampling.thinking ? "allowed" : "off");
  Session session(request, options, t, endpoint, image.url, result);
  if (const auto failure = session.run()) {
    if (!options.optional) {
      if (failure->bad_input) throw BadInput(failure->message);
      throw RuntimeFailure(failure->message);
    }
    log::warn("{}; continuing with the raw prompt (--enhance-optional)", failure->message);
    result.caption = request.prompt;
    result.fields = nullptr;
    result.failure = failure->message;
    return result;
  }
  if (cache && cache->store(key, {result.caption, result.fields}, session.answer()))
    result.cache_file = cache->file(key).string();
  log::info("enhance: caption of {} bytes after {} attempt(s)", result.caption.size(),
            result.attempts.size());
  return result;
}

}  // namespace avdit::pipeline::enhance
