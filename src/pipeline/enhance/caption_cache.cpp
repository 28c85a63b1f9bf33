// The on-disk caption cache.
#include "pipeline/enhance/caption_cache.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/log.h"
#include "core/sha256.h"

namespace avdit::pipeline::enhance {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {
constexpr int kFormat = 1;  // of the key and the file; a change makes every old entry a miss
}

CacheKey cache_key(std::string_view prompt, std::string_view image_sha256, std::string_view model,
                   std::string_view template_id, uint64_t seed, const Sampling& sampling) {
  Json s;
  s["temperature"] = sampling.temperature ? Json(*sampling.temperature) : Json();
  s["top_p"] = sampling.top_p ? Json(*sampling.top_p) : Json();
  s["max_tokens"] = sampling.max_tokens;
  s["thinking"] = sampling.thinking;
  Json k;
  k["format"] = kFormat;
  k["prompt"] = std::string(prompt);
  k["image_sha256"] = image_sha256.empty() ? Json() : Json(std::string(image_sha256));
  k["model"] = std::string(model);
  k["template"] = std::string(template_id);
  k["seed"] = seed;
  k["sampling"] = std::move(s);
  CacheKey key;
  key.sha256 = sha256_hex(std::string_view(k.dump()));
  key.fields = std::move(k);
  return key;
}

std::optional<fs::path> default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg && fs::path(xdg).is_absolute())
    return fs::path(xdg) / "avdit" / "captions";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".cache" / "avdit" / "captions";
  return std::nullopt;
}

fs::path CaptionCache::file(const CacheKey& key) const { return dir_ / (key.sha256 + ".json"); }

std::optional<CachedCaption> CaptionCache::load(const CacheKey& key) const {
  const fs::path path = file(key);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  Json j;
  try {
    j = Json::parse(ss.str());
  } catch (const Json::exception&) {
    log::warn("caption cache: {} is not valid JSON; asking the enhancer again", path.string());
    return std::nullopt;
  }
  if (!j.is_object() || j.value("key", Json()) != key.fields || !j.contains("caption") ||
      !j["caption"].is_string() || !j.contains("fields") || !j["fields"].is_object()) {
    log::warn("caption cache: {} does not hold this key's caption; asking the enhancer again",
              path.string());
    return std::nullopt;
  }
  return CachedCaption{j["caption"].get<std::string>(), j["fields"]};
}

bool CaptionCache::store(const CacheKey& key, const CachedCaption& entry,
                         std::string_view model_answer) const {
  const fs::path path = file(key);
  const fs::path tmp = dir_ / fmt::format(".{}.{}.tmp", key.sha256, ::getpid());
  Json j;
  j["key"] = key.fields;
  j["caption"] = entry.caption;
  j["fields"] = entry.fields;
  j["answer"] = std::string(model_answer);  // the model's text, thinking removed, for inspection
  const std::string text = j.dump(2) + "\n";
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    log::warn("caption cache: cannot create {} ({}); the caption is not cached", dir_.string(),
              ec.message());
    return false;
  }
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.flush();
    if (!f.good()) {
      f.close();
      fs::remove(tmp, ec);
      log::warn(
          "caption cache: cannot write {} (disk full or read-only?); the caption is not "
          "cached",
          tmp.string());
      return false;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    log::warn("caption cache: cannot rename {} to {} ({}); the caption is not cached", tmp.string(),
              path.string(), why);
    return false;
  }
  return true;
}

}  // namespace avdit::pipeline::enhance
