// `avdit inspect PATH`: what a checkpoint (file, shard index or model folder) or a config alone
// holds: tensors grouped by block, dtypes, parameters and bytes, the detected family and config.
#include <fmt/format.h>

#include <cctype>
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "commands.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/family.h"
#include "models/h3/adaln_slices.h"
#include "models/magi2/config.h"
#include "quant/nvfp4_checkpoint.h"
#include "models/magi2/nvfp4_memory.h"
#include "pipeline/pipeline_dir.h"
#include "pipeline/pipeline_plan.h"

namespace avdit::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// "block.layers.12.attention.x" -> ("block.layers.{i}.attention.x", 12); one index per name.
std::pair<std::string, int64_t> group_of(const std::string& name) {
  std::string out;
  int64_t index = -1;
  size_t i = 0;
  while (i < name.size()) {
    const bool at_part = i == 0 || name[i - 1] == '.';
    size_t j = i;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    int64_t value = -1;
    const bool number =
        j > i && std::from_chars(name.data() + i, name.data() + j, value).ec == std::errc();
    if (at_part && number && (j == name.size() || name[j] == '.') && index < 0) {
      index = value;  // a run of digits beyond int64 stays part of the name
      out += "{i}";
      i = j;
    } else {
      out += name[i++];
    }
  }
  return {out, index};
}

std::string human(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T"};
  int p = 0;
  while (std::abs(v) >= 1000 && p < 4) {
    v /= 1000;
    ++p;
  }
  return fmt::format("{:.{}f} {}{}", v, p == 0 ? 0 : 2, prefixes[p], unit);
}

struct Summary {
  std::map<std::string, int64_t> params_by_dtype, bytes_by_dtype;
  int64_t params = 0, bytes = 0, tensors = 0;
  struct Group {
    std::set<int64_t> indices;
    std::set<std::string> dtypes, shapes;
    int64_t params = 0;
  };
  std::map<std::string, Group> groups;

  void add(const std::string& name, DType dtype, const Shape& shape) {
    const int64_t n = shape_numel(shape), b = dtype_nbytes(dtype, n);
    params += n;
    bytes += b;
    ++tensors;
    params_by_dtype[std::string(dtype_name(dtype))] += n;
    bytes_by_dtype[std::string(dtype_name(dtype))] += b;
    const auto [g, idx] = group_of(name);
    Group& gr = groups[g];
    if (idx >= 0) gr.indices.insert(idx);
    gr.dtypes.insert(std::string(dtype_name(dtype)));
    gr.shapes.insert(shape_str(shape));
    gr.params += n;
  }

  json to_json() const {
    json j = {{"tensors", tensors}, {"params", params}, {"bytes", bytes},
              {"params_by_dtype", params_by_dtype}, {"bytes_by_dtype", bytes_by_dtype}};
    json gs = json::array();
    for (const auto& [name, g] : groups)
      gs.push_back({{"name", name}, {"count", std::max<size_t>(1, g.indices.size())}, {"params", g.params},
                    {"dtypes", g.dtypes}, {"shapes", g.shapes}});
    j["groups"] = gs;
    return j;
  }

  void print(std::ostream& os) const {
    os << fmt::format("{} tensors, {} parameters, {}\n", tensors, human(static_cast<double>(params), ""),
                      human(static_cast<double>(bytes), "B"));
    os << "\n| dtype | parameters | bytes |\n|---|---:|---:|\n";
    for (const auto& [d, n] : params_by_dtype)
      os << fmt::format("| {} | {} | {} |\n", d, n, bytes_by_dtype.at(d));
    os << "\n| tensor ({i} = block index) | blocks | dtype | shape | parameters |\n|---|---:|---|---|---:|\n";
    for (const auto& [name, g] : groups) {
      std::string shapes, dtypes;
      for (const auto& s : g.shapes) shapes += (shapes.empty() ? "" : " ") + s;
      for (const auto& d : g.dtypes) dtypes += (dtypes.empty() ? "" : " ") + d;
      os << fmt::format("| {} | {} | {} | {} | {} |\n", name, g.indices.empty() ? std::string("-")
                        : std::to_string(g.indices.size()), dtypes, shapes, g.params);
    }
  }
};

// A config file: a JSON object (family detection and the parsers index into it).
json read_config(const fs::path& path) {
  json j = read_json(path);
  AVDIT_REQUIRE(j.is_object(), "{}: expected a JSON object (a model config), found {}",
                path.string(), j.type_name());
  return j;
}

// The config that goes with PATH: the file itself (a .json that is not an index), or config.json
// beside the weights.
std::optional<json> config_for(const fs::path& path, const Checkpoint* ckpt) {
  if (ckpt && ckpt->config()) return *ckpt->config();
  if (fs::is_regular_file(path) && path.extension() == ".json" &&
      !path.filename().string().ends_with(".index.json"))
    return read_config(path);
  const fs::path beside = (fs::is_directory(path) ? path : path.parent_path()) / "config.json";
  if (fs::exists(beside)) return read_config(beside);
  return std::nullopt;
}

bool has_weights(const fs::path& path) {
  if (fs::is_directory(path)) return Checkpoint::folder_has_weights(path);
  const auto n = path.filename().string();
  return n.ends_with(".safetensors") || n.ends_with(".safetensors.index.json");
}

// A shard index next to a config (the official layout ships one even without the weights).
std::optional<json> index_beside(const fs::path& path) {
  const fs::path dir = fs::is_directory(path) ? path : path.parent_path();
  if (!fs::exists(dir)) return std::nullopt;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.path().filename().string().ends_with(".safetensors.index.json")) continue;
    json j = read_json(e.path());
    // What inspect reads from it: weight_map's size and metadata.total_size.
    const bool ok =
        j.is_object() && j.contains("weight_map") && j["weight_map"].is_object() &&
        (!j.contains("metadata") ||
         (j["metadata"].is_object() && (!j["metadata"].contains("total_size") ||
                                        j["metadata"]["total_size"].is_number_unsigned())));
    AVDIT_REQUIRE(ok,
                  "{}: not a shard index (expected {{\"weight_map\": {{...}}, \"metadata\": "
                  "{{\"total_size\": N}}}})",
                  e.path().string());
    return j;
  }
  return std::nullopt;
}

// A pipeline folder: its components in stage order, what each run reads and keeps on the GPU.
int inspect_pipeline(const fs::path& p, bool as_json) {
  const pipeline::PipelineComponents c = pipeline::find_components(p);
  const std::vector<pipeline::ComponentPlan> plan = pipeline::plan_pipeline(c, 2);
  int64_t peak = 0, disk = 0;
  for (const auto& r : plan) {
    peak = std::max(peak, r.resident_bytes);
    disk += r.disk_bytes;
  }
  if (as_json) {
    json rows = json::array();
    for (const auto& r : plan)
      rows.push_back({{"stage", r.stage}, {"component", r.component}, {"path", r.path}, {"kind", r.kind},
                      {"files", r.files}, {"disk_bytes", r.disk_bytes},
                      {"configs_only", r.configs_only},
                      {"params", r.configs_only ? json(nullptr) : json(r.params)},
                      {"read_bytes", r.configs_only ? json(nullptr) : json(r.read_bytes)},
                      {"gpu_weight_bytes", r.configs_only ? json(nullptr) : json(r.resident_bytes)}});
    std::cout << json{{"path", p.string()},
                      {"pipeline", pipeline::pipeline_family_name(c.family)},
                      {"components", rows},
                      {"disk_bytes", disk},
                      {"peak_gpu_weight_bytes", peak}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format("# {} ({} pipeline)\n\n", p.string(), pipeline::pipeline_family_name(c.family));
  std::cout << "| stage | component | kind | folder | files | on disk | parameters read | GPU weights (bf16 run) |\n"
               "|---|---|---|---|---:|---:|---:|---:|\n";
  bool weightless = false;
  for (const auto& r : plan) {
    weightless = weightless || r.configs_only;
    const std::string params = r.configs_only ? "configs only" : human(static_cast<double>(r.params), "");
    const std::string gpu = r.configs_only ? "-" : human(static_cast<double>(r.resident_bytes), "B");
    std::cout << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", r.stage, r.component, r.kind, r.path,
                             r.files, human(static_cast<double>(r.disk_bytes), "B"), params, gpu);
  }
  if (weightless)
    std::cout << "\nComponents marked 'configs only' have no weight files: `avdit generate --random-weights` runs "
                 "them with random weights.\n";
  if (peak > 0)
    std::cout << fmt::format(
      "\nEach stage frees its component before the next loads, so the GPU holds at most {} of weights "
      "(plus the stage's activations; `avdit generate` prints each stage's measured peak). On disk: {}.\n",
      human(static_cast<double>(peak), "B"), human(static_cast<double>(disk), "B"));
  return 0;
}

// --zero-slices: the H3 DiT's exactly-zero adaLN modulation slices (a pipeline folder: its DiT).
int inspect_zero_slices(const fs::path& p, bool as_json) {
  const bool h3_pipeline = pipeline::pipeline_family(p) == pipeline::PipelineFamily::H3;
  const fs::path dit = h3_pipeline ? pipeline::find_components(p).dit : p;
  const models::h3::AdalnSliceScan scan = models::h3::scan_adaln_slices(dit);
  if (as_json)
    std::cout << models::h3::adaln_zero_slices_json(scan).dump(2) << "\n";
  else
    std::cout << models::h3::adaln_zero_slices_table(scan);
  return 0;
}

}  // namespace

Run add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "inspect",
      "Show what a checkpoint or config holds: tensors grouped by block, dtypes, parameter counts\n"
      "and bytes, the model family and its config. PATH is a .safetensors file, a\n"
      "*.safetensors.index.json, a model folder, or a config .json alone (then the counts are\n"
      "those the config implies).");
  auto path = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("PATH", *path, "Checkpoint file, shard index, model folder or config")->required();
  cmd->add_flag("--json", *as_json, "Print one JSON object instead of tables");
  auto zero_slices = std::make_shared<bool>(false);
  auto* zero_flag = cmd->add_flag(
      "--zero-slices", *zero_slices,
      "H3 DiT (or an H3 pipeline folder): list every exactly-zero slice of the adaLN modulation\n"
      "weights (block, modality, slice; weight and bias zero, or weight zero with a nonzero bias)");
  auto nvfp4 = std::make_shared<bool>(false);
  auto tokens = std::make_shared<int64_t>(models::magi2::kPreviewTokens);
  cmd->add_flag("--nvfp4-experts", *nvfp4,
                "MAGI-2: the memory with NVFP4 routed experts: their bytes in bf16 vs packed (4.5 bits per\n"
                "weight), and the resident total of a single-GPU run (weights + one layer's activation peak)")
      ->excludes(zero_flag);
  cmd->add_option("--tokens", *tokens, "Tokens of one forward for the --nvfp4-experts activation estimate")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  return [=]() {
    const fs::path p(*path);
    AVDIT_REQUIRE(fs::exists(p), "{}: no such file or folder", p.string());
    if (*zero_slices) return inspect_zero_slices(p, *as_json);
    if (pipeline::pipeline_family(p)) return inspect_pipeline(p, *as_json);
    json out = {{"path", p.string()}};
    std::optional<Checkpoint> ckpt;
    if (has_weights(p)) ckpt = Checkpoint::open(p);
    const std::optional<json> config = config_for(p, ckpt ? &*ckpt : nullptr);
    std::optional<std::string> family;
    std::string family_source;
    if (config) {
      family = models::detect_family(*config);
      family_source = "config";
    }
    if (!family && ckpt) {
      family = models::detect_family_from_names(ckpt->names());
      family_source = "tensor names";
    }
    out["family"] = family ? json(*family) : json(nullptr);
    if (config) out["config"] = *config;

    Summary weights;
    if (ckpt) {
      for (const auto& f : ckpt->files())
        for (const auto& t : f->tensors())
          if (ckpt->contains(t.name)) weights.add(t.name, t.dtype, t.shape);
      out["checkpoint"] = weights.to_json();
      out["checkpoint"]["files"] = ckpt->files().size();
    }
    std::optional<models::FamilyReport> report;
    Summary implied;
    if (family && config) report = models::describe_family(*family, *config);
    if (report) {
      for (const auto& t : report->tensors) implied.add(t.name, t.dtype, t.shape);
      out["implied_by_config"] = implied.to_json();
      json facts = json::object();
      for (const auto& [k, v] : report->facts) facts[k] = v;
      out["facts"] = facts;
      if (ckpt) {
        std::vector<std::string> missing, misshapen;
        int64_t packed = 0;
        for (const auto& t : report->tensors) {
          if (!ckpt->contains(t.name) && quant::is_routed_expert_tensor(t.name) &&
              quant::has_nvfp4_packed(*ckpt, t.name)) {
            // NVFP4-packed routed experts (avdit quantize): the three parts must have the packed shapes.
            ++packed;
            for (const TensorDecl& d : quant::nvfp4_packed_decls(t.name, t.shape))
              if (!ckpt->contains(d.name)) missing.push_back(d.name);
              else if (ckpt->info(d.name).shape != d.shape || ckpt->info(d.name).dtype != d.dtype)
                misshapen.push_back(d.name);
            continue;
          }
          if (!ckpt->contains(t.name)) missing.push_back(t.name);
          else if (ckpt->info(t.name).shape != t.shape) misshapen.push_back(t.name);
        }
        out["config_vs_checkpoint"] = {{"missing", missing}, {"misshapen", misshapen}, {"nvfp4_packed", packed}};
      }
    }
    std::vector<std::pair<std::string, std::string>> nvfp4_lines;
    if (*nvfp4) {
      AVDIT_REQUIRE(config && models::magi2::is_magi2_config(*config),
                    "{}: --nvfp4-experts needs a MAGI-2 preview config (its routed experts are what NVFP4 packs)",
                    p.string());
      const models::magi2::Magi2Config mc = models::magi2::parse_magi2_config(*config);
      nvfp4_lines = models::magi2::nvfp4_memory_report(mc);
      for (const auto& l : models::magi2::nvfp4_resident_report(mc, *tokens)) nvfp4_lines.push_back(l);
      const models::magi2::Nvfp4MemoryCounts counts = models::magi2::nvfp4_memory_counts(mc);
      const models::magi2::Nvfp4ResidentEstimate est = models::magi2::nvfp4_resident_estimate(mc, *tokens);
      json parts = json::array();
      for (const auto& a : est.activation_parts)
        parts.push_back({{"name", a.name}, {"formula", a.formula}, {"bytes", a.bytes}});
      out["nvfp4_experts"] = {{"routed_params", counts.routed_params},
                              {"expert_matrices", counts.matrices},
                              {"routed_bf16_bytes", counts.bf16_bytes},
                              {"routed_nvfp4_bytes", counts.nvfp4_bytes},
                              {"bits_per_weight", counts.routed_params ? 8.0 * counts.nvfp4_bytes / counts.routed_params : 0.0},
                              {"other_weight_bytes", est.other_weight_bytes},
                              {"weight_bytes", est.weight_bytes},
                              {"tokens", est.tokens},
                              {"activation_parts", parts},
                              {"activation_bytes", est.activation_bytes},
                              {"resident_total_bytes", est.total_bytes}};
    }
    const std::optional<json> index = ckpt ? std::nullopt : index_beside(p);
    if (index && index->contains("metadata") && (*index)["metadata"].contains("total_size")) {
      out["index_total_size"] = (*index)["metadata"]["total_size"];
      out["index_tensors"] = (*index)["weight_map"].size();
    }

    if (*as_json) {
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    std::cout << "# " << p.string() << "\n\n";
    std::cout << "detected: " << (family ? *family + " (from " + family_source + ")" : "unknown family") << "\n";
    if (report)
      for (const auto& [k, v] : report->facts) std::cout << k << ": " << v << "\n";
    if (report) {
      std::cout << "\nimplied by the config: ";
      implied.print(std::cout);
    }
    if (index && out.contains("index_total_size"))
      std::cout << fmt::format("\nshard index beside the config: {} tensors, total_size {} bytes{}\n",
                               out["index_tensors"].get<int64_t>(), out["index_total_size"].get<int64_t>(),
                               report ? (implied.bytes == out["index_total_size"].get<int64_t>()
                                             ? " (matches the config exactly)"
                                             : fmt::format(" (the config implies {} bytes)", implied.bytes))
                                      : "");
    if (ckpt) {
      std::cout << fmt::format("\ncheckpoint ({} file{}): ", ckpt->files().size(), ckpt->files().size() == 1 ? "" : "s");
      weights.print(std::cout);
      if (out.contains("config_vs_checkpoint")) {
        const auto& cv = out["config_vs_checkpoint"];
        if (cv["missing"].empty() && cv["misshapen"].empty())
          std::cout << "\nevery tensor the config implies is present with the expected shape"
                    << (cv["nvfp4_packed"].get<int64_t>() > 0
                            ? fmt::format(" ({} routed-expert stacks NVFP4-packed)", cv["nvfp4_packed"].get<int64_t>())
                            : std::string())
                    << "\n";
        for (const auto& n : cv["missing"]) std::cout << "missing: " << n.get<std::string>() << "\n";
        for (const auto& n : cv["misshapen"]) std::cout << "wrong shape: " << n.get<std::string>() << "\n";
      }
    }
    if (!nvfp4_lines.empty()) {
      std::cout << "\nNVFP4 routed experts:\n";
      for (const auto& [k, v] : nvfp4_lines) std::cout << k << ": " << v << "\n";
    }
    if (config && !report) {
      std::cout << "\nconfig:\n" << config->dump(2) << "\n";
    }
    return 0;
  };
}

}  // namespace avdit::app
