#include "pipeline/adaln_cache.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "io/safetensors.h"
#include "ops/context.h"
#include "pipeline/prompt_cache.h"

namespace avdit::pipeline {

namespace fs = std::filesystem;
namespace h3 = models::h3;

std::string adaln_table_key(const fs::path& dit_dir, const std::vector<std::vector<float>>& sets,
                            DType act, bool cuda) {
  return adaln_table_key(folder_identity(dit_dir), sets, act, cuda);
}

std::string adaln_table_key(const std::string& identity,
                            const std::vector<std::vector<float>>& sets, DType act, bool cuda) {
  Sha256 h;
  h.update(fmt::format("avdit h3 adaln table v1\n{}\n{} {}\n", identity, dtype_name(act),
                       cuda ? "cuda" : "cpu"));
  for (const auto& set : sets) {
    h.update(fmt::format("{}:", set.size()));
    h.update(std::span(reinterpret_cast<const uint8_t*>(set.data()), set.size() * sizeof(float)));
  }
  return h.hex_digest();
}

std::optional<std::vector<h3::H3Tables>> load_adaln_table(ops::Context& ctx, const h3::H3Config& c,
                                                          const fs::path& dir, const std::string& key,
                                                          const std::vector<std::vector<float>>& sets) {
  const fs::path file = dir / "adaln" / (key + ".safetensors");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  try {
    const TensorMap m = read_all(file);
    std::vector<h3::H3Tables> out;
    for (size_t s = 0; s < sets.size(); ++s) {
      const std::string p = fmt::format("set{}.", s);
      auto get = [&](const char* name) {
        auto it = m.find(p + name);
        AVDIT_REQUIRE(it != m.end(), "{}: no {}{}", file.string(), p, name);
        return ctx.upload(it->second);
      };
      const Tensor t_emb = m.count(p + "t_emb") ? get("t_emb") : Tensor();
      out.push_back(h3::tables_over_storage(c, c.num_layers, sets[s], get("storage"),
                                            get("adaln_input"), t_emb));
    }
    return out;
  } catch (const std::exception& e) {
    log::warn("adaLN table cache: ignoring {} ({})", file.string(), e.what());
    return std::nullopt;
  }
}

void store_adaln_table(ops::Context& ctx, const fs::path& dir, const std::string& key,
                       const h3::H3Model& model) {
  try {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (size_t s = 0; s < model.table().size(); ++s) {
      const h3::H3Tables& t = model.table()[s].second;
      const std::string p = fmt::format("set{}.", s);
      tensors.emplace_back(p + "storage", ctx.download(t.storage));
      tensors.emplace_back(p + "adaln_input", ctx.download(t.adaln_input));
      if (t.t_emb.defined()) tensors.emplace_back(p + "t_emb", ctx.download(t.t_emb));
    }
    fs::create_directories(dir / "adaln");
    write_safetensors(dir / "adaln" / (key + ".safetensors"), tensors, {{"avdit", "h3 adaln table"}});
  } catch (const std::exception& e) {
    log::warn("adaLN table cache: could not write under {} ({}); the next run computes it again",
              dir.string(), e.what());
  }
}

}  // namespace avdit::pipeline
