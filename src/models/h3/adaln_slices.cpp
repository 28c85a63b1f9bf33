// Scanning the H3 DiT's adaLN projections for exactly-zero slices (`avdit inspect --zero-slices`).
#include "models/h3/adaln_slices.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/h3/config.h"
#include "models/h3/weights.h"

namespace avdit::models::h3 {

namespace fs = std::filesystem;

namespace {

// The block table's six slices in the order of the reference's chunk(6) (model.cpp's slice(t, s)).
constexpr const char* kSliceNames[kAdalnSlices] = {"shift_msa", "scale_msa", "gate_msa",
                                                   "shift_mlp", "scale_mlp", "gate_mlp"};
constexpr const char* kFinalSliceNames[2] = {"shift", "scale"};
// The modality of row m * 3 + modality: a packed row's token tag (0 video, 1 text, 2 audio), as the
// reference indexes the table (sglang's minimax_h3.py: inverse_indices * 3 + token_tags.clamp(0);
// the golden h3-tiny README: f = modality x 6H + slice x H + c, 0 video, 1 text, 2 audio).
constexpr const char* kModalityNames[kModalities] = {"video", "text", "audio"};

constexpr const char* kExpected =
    "expected a MiniMax-H3 DiT checkpoint: a transformer folder (or its .safetensors file or shard "
    "index) with config.json of class MiniMaxH3DiTModel beside blocks.{i}.adaln_proj.linear.* and "
    "final_layer.adaln_proj.linear.*";

struct Extent {
  double max_abs = 0;
  bool zero = true;
};

Extent extent_of(const Tensor& t) {
  const Tensor f = t.to_f32();
  const float* p = f.f32();
  Extent e;
  bool nan = false;
  for (int64_t i = 0, n = f.numel(); i < n; ++i) {
    const float v = p[i];
    if (v != 0.0f) e.zero = false;  // NaN included
    if (std::isnan(v)) nan = true;
    e.max_abs = std::max(e.max_abs, static_cast<double>(std::fabs(v)));
  }
  if (nan) e.max_abs = std::numeric_limits<double>::quiet_NaN();
  return e;
}

std::string projection_name(int64_t p, int64_t blocks) {
  return p < blocks ? fmt::format("blocks.{}.adaln_proj.linear", p)
                    : std::string("final_layer.adaln_proj.linear");
}

std::string number(double v) { return std::isnan(v) ? "nan" : fmt::format("{:.4g}", v); }

}  // namespace

std::string AdalnSlice::block_name() const { return block < 0 ? "final" : std::to_string(block); }
std::string AdalnSlice::modality_name() const {
  return modality < 0 ? "all" : kModalityNames[modality];
}
std::string AdalnSlice::slice_name() const {
  return block < 0 ? kFinalSliceNames[slice] : kSliceNames[slice];
}

int64_t AdalnSliceScan::zero_count() const {
  int64_t n = 0;
  for (const auto& s : slices) n += s.zero();
  return n;
}
int64_t AdalnSliceScan::constant_count() const {
  int64_t n = 0;
  for (const auto& s : slices) n += s.constant();
  return n;
}

AdalnSliceScan scan_adaln_slices(const fs::path& path) {
  std::error_code ec;
  AVDIT_REQUIRE(fs::exists(path, ec), "{}: no such file or folder", path.string());
  const fs::path config_path =
      (fs::is_directory(path, ec) ? path : path.parent_path()) / "config.json";
  AVDIT_REQUIRE(fs::is_regular_file(config_path, ec), "{}: no config.json beside the weights; {}",
                path.string(), kExpected);
  const nlohmann::json j = read_json(config_path);
  AVDIT_REQUIRE(is_h3_config(j), "{}: {} is not an H3 DiT config; {}", path.string(),
                config_path.string(), kExpected);
  // Only the shards that hold an adaLN projection (or the curve table, which sets its input
  // width) are mapped.
  const Checkpoint ckpt = Checkpoint::open(path, [](std::string_view n) {
    return n == "adaln_t_table" || is_adaln_projection(std::string(n));
  });
  const H3Config c = resolve_variant(H3Config::from_json(j), ckpt);

  AdalnSliceScan scan;
  scan.path = path;
  scan.blocks = c.num_layers;
  scan.hidden = c.hidden_size;
  const int64_t n = c.num_layers, H = c.hidden_size;
  // Each projection's tensors, checked against the config before anything is read.
  std::map<std::string, std::pair<int64_t, bool>, std::less<>>
      wanted;  // name -> (projection, bias)
  for (int64_t p = 0; p <= n; ++p) {
    const int64_t rows = p < n ? c.adaln_out_features : c.final_adaln_out_features;
    for (const bool bias : {false, true}) {
      const std::string name = projection_name(p, n) + (bias ? ".bias" : ".weight");
      AVDIT_REQUIRE(ckpt.contains(name), "{}: checkpoint lacks tensor '{}'; {}", path.string(),
                    name, kExpected);
      const TensorInfo& info = ckpt.info(name);
      const Shape expected = bias ? Shape{rows} : Shape{rows, c.time_embed_dim};
      AVDIT_REQUIRE(info.shape == expected,
                    "{}: tensor '{}' has shape {}, config.json implies {} (hidden_size {}, "
                    "time_embed_dim {})",
                    path.string(), name, shape_str(info.shape), shape_str(expected), H,
                    c.time_embed_dim);
      AVDIT_REQUIRE(dtype_is_float(info.dtype),
                    "{}: tensor '{}' has dtype {}, expected a float type", path.string(), name,
                    dtype_name(info.dtype));
      wanted[name] = {p, bias};
    }
  }
  // Extents per (projection, slice) of the weights and of the biases, read shard by shard in file
  // order, one weight slice [H, Dt] at a time.
  std::vector<std::vector<Extent>> weights(n + 1), biases(n + 1);
  for (const auto& file : ckpt.files())
    for (const TensorInfo& t : file->tensors()) {
      const auto it = wanted.find(t.name);
      if (it == wanted.end()) continue;
      const auto [p, bias] = it->second;
      const int64_t count = (p < n ? c.adaln_out_features : c.final_adaln_out_features) / H;
      auto& out = bias ? biases[p] : weights[p];
      const Tensor whole = bias ? file->get(t.name) : Tensor();
      for (int64_t s = 0; s < count; ++s)
        out.push_back(extent_of(bias ? whole.slice_rows(s * H, (s + 1) * H)
                                     : file->get_rows(t.name, s * H, (s + 1) * H)));
    }
  for (int64_t p = 0; p <= n; ++p)
    for (size_t k = 0; k < weights[p].size(); ++k) {
      AdalnSlice s;
      const auto kk = static_cast<int64_t>(k);
      s.block = p < n ? p : -1;
      s.modality = p < n ? kk / kAdalnSlices : -1;
      s.slice = p < n ? kk % kAdalnSlices : kk;
      s.row_begin = kk * H;
      s.rows = H;
      s.max_abs_weight = weights[p][k].max_abs;
      s.weight_zero = weights[p][k].zero;
      s.max_abs_bias = biases[p][k].max_abs;
      s.bias_zero = biases[p][k].zero;
      scan.slices.push_back(s);
    }
  return scan;
}

nlohmann::json adaln_zero_slices_json(const AdalnSliceScan& scan) {
  nlohmann::json zero = nlohmann::json::array(), constant = nlohmann::json::array();
  for (const AdalnSlice& s : scan.slices) {
    if (!s.weight_zero) continue;
    nlohmann::json e = {
        {"tensor", projection_name(s.block < 0 ? scan.blocks : s.block, scan.blocks)},
        {"block", s.block < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.block)},
        {"modality", s.modality < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.modality_name())},
        {"slice", s.slice_name()},
        {"row_begin", s.row_begin},
        {"rows", s.rows},
        {"max_abs_weight", s.max_abs_weight},
        {"max_abs_bias", s.max_abs_bias}};
    (s.bias_zero ? zero : constant).push_back(e);
  }
  return {{"path", scan.path.string()}, {"blocks", scan.blocks},
          {"hidden_size", scan.hidden}, {"slices", scan.slices.size()},
          {"zero", scan.zero_count()},  {"weight_zero_bias_nonzero", scan.constant_count()},
          {"zero_slices", zero},        {"weight_zero_bias_nonzero_slices", constant}};
}

std::string adaln_zero_slices_table(const AdalnSliceScan& scan) {
  std::ostringstream os;
  os << fmt::format(
      "# {}: adaLN modulation slices that are exactly zero\n\n"
      "{} blocks x 3 modalities (video, text, audio) x 6 slices, and the final layer's shift and "
      "scale: {} slices of {} rows each\n",
      scan.path.string(), scan.blocks, scan.slices.size(), scan.hidden);
  if (scan.zero_count() + scan.constant_count() > 0) {
    os << "\n| block | modality | slice | rows | max abs weight | max abs bias | zero |\n"
          "|---:|---|---|---|---:|---:|---|\n";
    for (const AdalnSlice& s : scan.slices)
      if (s.weight_zero)
        os << fmt::format("| {} | {} | {} | [{}, {}) | {} | {} | {} |\n", s.block_name(),
                          s.modality_name(), s.slice_name(), s.row_begin, s.row_begin + s.rows,
                          number(s.max_abs_weight), number(s.max_abs_bias),
                          s.bias_zero ? "weight and bias" : "weight only (bias nonzero)");
  }
  os << fmt::format(
      "\n{} zero slices of {} (weight and bias exactly zero: the modulation is 0 at every "
      "timestep)\n",
      scan.zero_count(), scan.slices.size());
  if (scan.constant_count() > 0)
    os << fmt::format(
        "{} more with zero weights but a nonzero bias (a modulation constant in time; not counted "
        "as zero)\n",
        scan.constant_count());
  return os.str();
}

}  // namespace avdit::models::h3
