#include "pipeline/prompt_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "io/safetensors.h"
#include "pipeline/enhance/caption_cache.h"

namespace avdit::pipeline {

namespace fs = std::filesystem;

namespace {

// The bytes of a file's first `limit` bytes' JSON header (a safetensors header is its first
// 8 + n bytes); empty when unreadable.
std::string safetensors_header(const fs::path& file) {
  std::ifstream f(file, std::ios::binary);
  uint64_t n = 0;
  if (!f.read(reinterpret_cast<char*>(&n), 8) || n > (uint64_t{100} << 20)) return {};
  std::string h(n, '\0');
  if (!f.read(h.data(), static_cast<std::streamsize>(n))) return {};
  return h;
}

std::string read_text(const fs::path& file) {
  std::ifstream f(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The order the generate pipelines and `avdit encode` write the states in.
constexpr const char* kStateNames[] = {"text_embeds", "text_token_tags", "txt_feat",
                                       "txt_len",     "null_txt_feat",   "null_txt_len"};

}  // namespace

std::optional<fs::path> cache_root(const std::string& dir, bool off) {
  if (off) return std::nullopt;
  if (!dir.empty()) return fs::path(dir);
  if (auto captions = enhance::default_cache_dir()) return captions->parent_path();
  return std::nullopt;
}

std::string folder_identity(const fs::path& dir) {
  Sha256 h;
  h.update("config.json\n");
  h.update(read_text(dir / "config.json"));
  std::vector<fs::path> shards;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") shards.push_back(e.path());
  std::sort(shards.begin(), shards.end());
  for (const fs::path& s : shards) {
    const auto size = fs::file_size(s, ec);
    const auto mtime = fs::last_write_time(s, ec).time_since_epoch().count();
    h.update(fmt::format("\n{} {} {}\n", s.filename().string(), size, mtime));
    h.update(safetensors_header(s));
  }
  return h.hex_digest();
}

std::string prompt_state_settings(DType act, bool cuda, int layers, bool bf16_states) {
  std::string s = fmt::format("act {} {}-states device {}", dtype_name(act),
                              bf16_states ? "bf16" : "f32", cuda ? "cuda" : "cpu");
  if (layers > 0) s += fmt::format(" layers {}", layers);
  return s;
}

std::string prompt_state_key(const std::string& identity, const PromptIds& ids,
                             const std::string& settings) {
  Sha256 h;
  h.update(fmt::format("avdit prompt states v1\n{}\n{}\n{}\n", identity, settings,
                       ids.magi2 ? "magi2" : "h3"));
  auto put = [&](const std::vector<int32_t>& v) {
    h.update(fmt::format("{}:", v.size()));
    h.update(std::span(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(int32_t)));
  };
  put(ids.prompt);
  h.update(ids.has_negative ? "negative" : "no negative");
  put(ids.negative);
  h.update(std::span(ids.tags.data(), ids.tags.size()));
  return h.hex_digest();
}

std::optional<NamedTensors> load_prompt_states(const fs::path& dir, const std::string& key) {
  const fs::path file = dir / "prompts" / (key + ".safetensors");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  try {
    const TensorMap m = read_all(file);
    NamedTensors out;
    for (const char* n : kStateNames)
      if (auto it = m.find(n); it != m.end()) out.emplace_back(n, it->second.clone());
    AVDIT_REQUIRE(out.size() == m.size() && !out.empty(), "{}: unexpected tensors", file.string());
    return out;
  } catch (const std::exception& e) {
    log::warn("prompt-state cache: ignoring {} ({})", file.string(), e.what());
    return std::nullopt;
  }
}

void store_prompt_states(const fs::path& dir, const std::string& key, const NamedTensors& states) {
  try {
    fs::create_directories(dir / "prompts");
    write_safetensors(dir / "prompts" / (key + ".safetensors"), states, {{"avdit", "prompt states"}});
  } catch (const std::exception& e) {
    log::warn("prompt-state cache: could not write under {} ({}); the next run encodes again",
              dir.string(), e.what());
  }
}

}  // namespace avdit::pipeline
