// The prompt enhancer's tuning options (thinking, cache, timeouts, retries, sampling), shared by
// `avdit enhance` and the pipeline command so that both spell them the same way.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "pipeline/enhance/enhancer.h"

namespace avdit::app {

struct EnhanceCli {
  pipeline::enhance::EnhanceOptions options;  // url and model are the caller's own options
  std::string cache_dir;
  bool no_cache = false;
  std::optional<double> temperature, top_p;
};

// Adds --enhance-thinking, --enhance-optional, --enhance-cache DIR, --no-enhance-cache and the
// timeout, retry and sampling options to `cmd`, writing into `cli`.
void add_enhance_options(CLI::App* cmd, EnhanceCli& cli);

// The options after parsing: the cache folder resolved (the default one unless --enhance-cache or
// --no-enhance-cache), the sampling values copied in.
pipeline::enhance::EnhanceOptions enhance_options(const EnhanceCli& cli);

}  // namespace avdit::app
