// Packed routed experts in checkpoints: names, checked reads, and the quantize command's rewrite
// (one source tensor quantised at a time, so a checkpoint larger than memory can be converted).
#include "quant/nvfp4_checkpoint.h"

#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"

namespace avdit::quant {

namespace fs = std::filesystem;

namespace {

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

std::string part_name(const std::string& name, std::string_view suffix) { return name + std::string(suffix); }

// One packed part, shape- and dtype-checked.
Tensor read_part(const Checkpoint& ckpt, const std::string& name, std::string_view suffix, DType dtype,
                 const Shape& shape, int64_t g0, int64_t g1) {
  const std::string n = part_name(name, suffix);
  AVDIT_REQUIRE(ckpt.contains(n), "{}: tensor {} is missing (the NVFP4-packed form of {} needs {}, {} and {})",
                ckpt.source().string(), n, name, part_name(name, kNvfp4ValuesSuffix),
                part_name(name, kNvfp4BlockScaleSuffix), part_name(name, kNvfp4GlobalScaleSuffix));
  const TensorInfo& info = ckpt.info(n);
  AVDIT_REQUIRE(info.dtype == dtype && info.shape == shape,
                "{}: tensor {} is {} {}, expected {} {} (NVFP4 layout for the config's {})", ckpt.source().string(), n,
                dtype_name(info.dtype), shape_str(info.shape), dtype_name(dtype), shape_str(shape), name);
  if (g0 == 0 && g1 == shape[0]) return ckpt.get(n);
  return ckpt.get_rows(n, g0, g1);
}

}  // namespace

bool is_routed_expert_tensor(std::string_view name) {
  return ends_with(name, "moe_mlp.W_gate") || ends_with(name, "moe_mlp.W_up") || ends_with(name, "moe_mlp.W_down");
}

std::vector<TensorDecl> nvfp4_packed_decls(const std::string& name, const Shape& shape) {
  AVDIT_REQUIRE(shape.size() == 3, "NVFP4 experts: {} must be [G, K, N], got {}", name, shape_str(shape));
  const int64_t g = shape[0], k = shape[1], n = shape[2];
  AVDIT_REQUIRE(k % kNvfp4Block == 0, "NVFP4 experts: {} {} has K = {}, not a multiple of {}", name,
                shape_str(shape), k, kNvfp4Block);
  return {TensorDecl{part_name(name, kNvfp4ValuesSuffix), {g, n, k / 2}, DType::U8},
          TensorDecl{part_name(name, kNvfp4BlockScaleSuffix), {g, n, k / kNvfp4Block}, DType::F8_E4M3},
          TensorDecl{part_name(name, kNvfp4GlobalScaleSuffix), {g}, DType::F32}};
}

bool has_nvfp4_packed(const Checkpoint& ckpt, const std::string& name) {
  return ckpt.contains(part_name(name, kNvfp4ValuesSuffix));
}

Nvfp4Matrix read_nvfp4_packed(const Checkpoint& ckpt, const std::string& name, const Shape& shape, int64_t g0,
                              int64_t g1) {
  const std::vector<TensorDecl> d = nvfp4_packed_decls(name, shape);
  AVDIT_REQUIRE(0 <= g0 && g0 < g1 && g1 <= shape[0], "NVFP4 experts: rows [{}, {}) of {} outside [0, {})", g0, g1,
                name, shape[0]);
  Nvfp4Matrix m;
  m.values = read_part(ckpt, name, kNvfp4ValuesSuffix, d[0].dtype, d[0].shape, g0, g1);
  m.block_scales = read_part(ckpt, name, kNvfp4BlockScaleSuffix, d[1].dtype, d[1].shape, g0, g1);
  m.global_scales = read_part(ckpt, name, kNvfp4GlobalScaleSuffix, d[2].dtype, d[2].shape, g0, g1);
  m.shape = {g1 - g0, shape[1], shape[2]};
  m.reduce_dim = 1;
  return m;
}

QuantizeSummary quantize_checkpoint_nvfp4_experts(const fs::path& in, const fs::path& out, bool progress,
                                                  int64_t max_shard_bytes) {
  AVDIT_REQUIRE(!fs::exists(out), "{}: already exists; quantize writes a new folder (remove it or choose another)",
                out.string());
  AVDIT_REQUIRE(fs::exists(in), "{}: no such file or folder", in.string());
  const Checkpoint ckpt = Checkpoint::open(in);
  const nlohmann::json* cfg = ckpt.config();
  AVDIT_REQUIRE(cfg != nullptr, "{}: no config.json beside it; the packed copy needs the model's config", in.string());

  QuantizeSummary sum;
  std::vector<TensorDecl> decls;
  std::map<std::string, std::string> source_of;  // packed part -> routed-expert tensor
  for (const std::string& name : ckpt.names()) {
    AVDIT_REQUIRE(!ends_with(name, kNvfp4ValuesSuffix) && !ends_with(name, kNvfp4BlockScaleSuffix) &&
                      !ends_with(name, kNvfp4GlobalScaleSuffix),
                  "{}: already holds NVFP4-packed experts ({}); nothing to do", in.string(), name);
    const TensorInfo& info = ckpt.info(name);
    const int64_t bytes = dtype_nbytes(info.dtype, shape_numel(info.shape));
    sum.bytes_in += bytes;
    if (!is_routed_expert_tensor(name)) {
      decls.push_back(TensorDecl{name, info.shape, info.dtype});
      ++sum.copied_tensors;
      continue;
    }
    AVDIT_REQUIRE(info.dtype == DType::BF16 || info.dtype == DType::F32,
                  "{}: routed-expert tensor {} is {}, expected BF16 or F32", in.string(), name,
                  dtype_name(info.dtype));
    for (const TensorDecl& d : nvfp4_packed_decls(name, info.shape)) {
      source_of[d.name] = name;
      decls.push_back(d);
    }
    sum.routed_bytes_in += bytes;
    ++sum.packed_tensors;
  }
  AVDIT_REQUIRE(sum.packed_tensors > 0, "{}: no routed-expert tensors (moe_mlp.W_gate / W_up / W_down) to pack",
                in.string());

  const fs::path tmp = out.parent_path() / fmt::format(".{}.tmp-{}", out.filename().string(), ::getpid());
  fs::remove_all(tmp);
  std::optional<Progress> bar;
  if (progress) bar.emplace(static_cast<int64_t>(decls.size()), "quantize");
  // The three parts of one expert stack are consecutive: quantise once, hand out each part.
  std::string cached_name;
  std::shared_ptr<Nvfp4Matrix> cached;
  try {
    write_checkpoint_sharded(
        tmp, decls,
        [&](const TensorDecl& d) -> Tensor {
          if (bar) bar->tick();
          sum.bytes_out += dtype_nbytes(d.dtype, shape_numel(d.shape));
          auto it = source_of.find(d.name);
          if (it == source_of.end()) return ckpt.get(d.name);
          sum.routed_bytes_out += dtype_nbytes(d.dtype, shape_numel(d.shape));
          if (cached_name != it->second) {
            cached = std::make_shared<Nvfp4Matrix>(quantize_nvfp4(ckpt.get(it->second), 1));
            cached_name = it->second;
          }
          if (ends_with(d.name, kNvfp4ValuesSuffix)) return cached->values;
          if (ends_with(d.name, kNvfp4BlockScaleSuffix)) return cached->block_scales;
          return cached->global_scales;
        },
        max_shard_bytes);
    // config.json byte for byte (the folder's own file; a config only parsed from elsewhere is dumped).
    const fs::path cfg_src = ckpt.dir() / "config.json", cfg_path = tmp / "config.json";
    if (fs::exists(cfg_src)) {
      fs::copy_file(cfg_src, cfg_path);
    } else {
      std::ofstream f(cfg_path);
      f << cfg->dump(2) << "\n";
      AVDIT_REQUIRE(f.flush().good(), "{}: cannot write", cfg_path.string());
    }
    for (const auto& e : fs::directory_iterator(tmp))
      if (e.path().extension() == ".safetensors") ++sum.shards;
    fs::rename(tmp, out);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  if (bar) bar->finish();
  return sum;
}

}  // namespace avdit::quant
