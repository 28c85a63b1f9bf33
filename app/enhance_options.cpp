// The prompt enhancer's shared command-line options.
#include "enhance_options.h"

#include "core/error.h"
#include "core/log.h"
#include "pipeline/enhance/caption_cache.h"

namespace avdit::app {

namespace enh = pipeline::enhance;

void add_enhance_options(CLI::App* cmd, EnhanceCli& cli) {
  auto& o = cli.options;
  const std::string g = "Prompt enhancer";
  cmd->add_flag("--enhance-thinking", o.sampling.thinking,
                "Let a reasoning model think (by default the request sets chat_template_kwargs "
                "enable_thinking false and reasoning_effort low; <think> blocks are always "
                "stripped)")
      ->group(g);
  cmd->add_flag("--enhance-optional", o.optional,
                "When the enhancer cannot be reached or gives no caption: warn and continue with "
                "the raw prompt instead of failing")
      ->group(g);
  auto* cache = cmd->add_option("--enhance-cache", cli.cache_dir,
                                "Caption cache folder (default $XDG_CACHE_HOME/avdit/captions or "
                                "~/.cache/avdit/captions)")
                    ->group(g);
  cmd->add_flag("--no-enhance-cache", cli.no_cache, "Neither read nor write cached captions")
      ->group(g)
      ->excludes(cache);
  cmd->add_option("--enhance-attempts", o.retry.attempts, "Requests at most (default 4)")->group(g);
  cmd->add_option("--enhance-timeout", o.retry.timeout_s,
                  "Seconds one request may take (default 180)")
      ->group(g);
  cmd->add_option("--enhance-connect-timeout", o.retry.connect_timeout_s,
                  "Seconds to wait for a connection (default 10)")
      ->group(g);
  cmd->add_option("--enhance-max-time", o.retry.max_time_s,
                  "Seconds for all attempts and waits together (default 600)")
      ->group(g);
  cmd->add_option("--enhance-backoff", o.retry.backoff_s,
                  "Seconds before the first retry, doubled after each failure up to 30 (default "
                  "1); a server's Retry-After takes precedence")
      ->group(g);
  cmd->add_option("--enhance-temperature", cli.temperature,
                  "Sampling temperature (default: the server's, as the reference)")
      ->group(g);
  cmd->add_option("--enhance-top-p", cli.top_p, "Nucleus sampling (default: the server's)")
      ->group(g);
  cmd->add_option("--enhance-max-tokens", o.sampling.max_tokens,
                  "Token budget of the answer (default 16384, the reference's)")
      ->group(g);
}

enh::EnhanceOptions enhance_options(const EnhanceCli& cli) {
  enh::EnhanceOptions o = cli.options;
  o.sampling.temperature = cli.temperature;
  o.sampling.top_p = cli.top_p;
  if (cli.no_cache) {
    o.cache_dir.reset();
  } else if (!cli.cache_dir.empty()) {
    o.cache_dir = cli.cache_dir;
  } else {
    o.cache_dir = enh::default_cache_dir();
    if (!o.cache_dir)
      log::warn(
          "enhance: neither XDG_CACHE_HOME nor HOME is set, so captions are not cached "
          "(give --enhance-cache DIR)");
  }
  return o;
}

}  // namespace avdit::app
