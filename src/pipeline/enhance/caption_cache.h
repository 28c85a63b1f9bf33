// Captions kept on disk across runs. Enhancement is sampled, so without this two runs of one
// prompt and seed would not render the same clip. One JSON file per key, named by the SHA-256 of
// the key, written to a temporary and renamed so that a reader never sees half a file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "pipeline/enhance/chat_request.h"

namespace avdit::pipeline::enhance {

// What a caption depends on: the prompt (and first frame), the model, the template text, the
// seed and the sampling settings. Not the URL: one model behind two servers is one model.
struct CacheKey {
  nlohmann::ordered_json fields;  // canonical: fixed key order, every field present
  std::string sha256;             // of fields.dump(); the file name
};

CacheKey cache_key(std::string_view prompt, std::string_view image_sha256, std::string_view model,
                   std::string_view template_id, uint64_t seed, const Sampling& sampling);

struct CachedCaption {
  std::string caption;            // the exact bytes handed to the pipeline
  nlohmann::ordered_json fields;  // the parsed caption JSON
};

// $XDG_CACHE_HOME/avdit/captions, else $HOME/.cache/avdit/captions; nullopt when neither is set.
std::optional<std::filesystem::path> default_cache_dir();

class CaptionCache {
 public:
  explicit CaptionCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path file(const CacheKey& key) const;

  // The stored caption, or nullopt when there is none. A file that is unreadable, not ours or
  // stored under another key (a corrupt write by another program) is a miss, with a warning.
  std::optional<CachedCaption> load(const CacheKey& key) const;

  // Writes the entry (temporary, then rename). A failure is a warning, not an error: the caption
  // itself is fine, only the next run will ask again. Returns whether it was stored.
  bool store(const CacheKey& key, const CachedCaption& entry, std::string_view model_answer) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace avdit::pipeline::enhance
