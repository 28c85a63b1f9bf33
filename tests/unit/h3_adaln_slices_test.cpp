// `avdit inspect --zero-slices`: the exactly-zero adaLN modulation slices of an H3 DiT, on a copy
// of the tiny golden checkpoint with chosen slices zeroed (written in several shards), on the
// golden itself, and the errors for folders that are not an H3 DiT.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <tuple>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/h3/adaln_slices.h"

namespace avdit::models::h3 {
namespace {

namespace fs = std::filesystem;

const fs::path kGolden = fs::path(AVDIT_SHARED_DIR) / "golden";
const fs::path kTiny = kGolden / "h3-tiny";
constexpr int64_t H = 192;  // the tiny config's hidden_size (3 blocks, time_embed_dim 96)

// Sets rows [begin, end) of a BF16 tensor (a weight's rows or a bias's entries) to `bits`.
void fill_rows(Tensor& t, int64_t begin, int64_t end, uint16_t bits) {
  const int64_t row = t.numel() / t.size(0);
  uint16_t* p = t.data<uint16_t>();
  for (int64_t i = begin * row; i < end * row; ++i) p[i] = bits;
}

struct Edit {
  std::string projection;  // "blocks.1" or "final_layer"
  int64_t slice_index;     // feature rows [slice_index * H, (slice_index + 1) * H)
  bool weight, bias;       // which to zero
};

// The tiny golden with the edits applied, written in shards of at most 1 MB with an index (so the
// scan crosses files) and its config.json.
fs::path edited_copy(const std::string& tag, const std::vector<Edit>& edits) {
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("avdit_adaln_{}_{}", tag, ::getpid());
  fs::remove_all(dir);
  const Checkpoint ckpt = Checkpoint::open(kTiny);
  std::vector<TensorDecl> decls;
  for (const auto& f : ckpt.files())
    for (const TensorInfo& t : f->tensors()) decls.push_back({t.name, t.shape, t.dtype});
  write_checkpoint_sharded(
      dir, decls,
      [&](const TensorDecl& d) {
        Tensor t = ckpt.get(d.name).clone();
        for (const Edit& e : edits)
          for (const bool bias : {false, true})
            if ((bias ? e.bias : e.weight) &&
                d.name == e.projection + ".adaln_proj.linear." + (bias ? "bias" : "weight")) {
              EXPECT_EQ(t.dtype(), DType::BF16) << d.name;
              fill_rows(t, e.slice_index * H, (e.slice_index + 1) * H, 0x0000);
              // One -0 entry: exactly zero too.
              fill_rows(t, e.slice_index * H, e.slice_index * H + 1, 0x8000);
            }
        return t;
      },
      /*max_shard_bytes=*/1 << 20);
  fs::copy_file(kTiny / "config.json", dir / "config.json");
  return dir;
}

using Key = std::tuple<std::string, std::string, std::string>;  // block, modality, slice

std::set<Key> keys(const AdalnSliceScan& scan, bool bias_zero) {
  std::set<Key> out;
  for (const AdalnSlice& s : scan.slices)
    if (s.weight_zero && s.bias_zero == bias_zero)
      out.insert({s.block_name(), s.modality_name(), s.slice_name()});
  return out;
}

TEST(H3AdalnSlices, ListsExactlyTheZeroedSlices) {
  // Block 1's text gate_mlp (modality 1, slice 5) and the final layer's scale: weight and bias
  // zero. Block 2's audio shift_msa (modality 2, slice 0): weight zero, bias left nonzero.
  const fs::path dir = edited_copy("zeroed", {{"blocks.1", 1 * 6 + 5, true, true},
                                              {"final_layer", 1, true, true},
                                              {"blocks.2", 2 * 6 + 0, true, false},
                                              // Bias zero alone is not a zero slice.
                                              {"blocks.0", 0 * 6 + 2, false, true}});
  ASSERT_GT(Checkpoint::open(dir).files().size(), 1u) << "the copy should span several shards";
  const AdalnSliceScan scan = scan_adaln_slices(dir);
  EXPECT_EQ(scan.blocks, 3);
  EXPECT_EQ(scan.hidden, H);
  ASSERT_EQ(scan.slices.size(), 3u * 18 + 2);
  EXPECT_EQ(keys(scan, true),
            (std::set<Key>{{"1", "text", "gate_mlp"}, {"final", "all", "scale"}}));
  EXPECT_EQ(keys(scan, false), (std::set<Key>{{"2", "audio", "shift_msa"}}));
  EXPECT_EQ(scan.zero_count(), 2);
  EXPECT_EQ(scan.constant_count(), 1);
  for (const AdalnSlice& s : scan.slices) {
    if (s.block == 1 && s.modality == 1 && s.slice == 5) {
      EXPECT_EQ(s.row_begin, 11 * H);
      EXPECT_EQ(s.max_abs_weight, 0.0);
      EXPECT_EQ(s.max_abs_bias, 0.0);
    }
    if (s.block == 2 && s.modality == 2 && s.slice == 0) {
      EXPECT_GT(s.max_abs_bias, 0.0);
    }
    if (s.block == 0 && s.modality == 0 && s.slice == 2) {
      EXPECT_TRUE(s.bias_zero);
      EXPECT_FALSE(s.weight_zero);
      EXPECT_GT(s.max_abs_weight, 0.0);
    }
  }

  const nlohmann::json j = adaln_zero_slices_json(scan);
  EXPECT_EQ(j["slices"], 56);
  EXPECT_EQ(j["zero"], 2);
  EXPECT_EQ(j["weight_zero_bias_nonzero"], 1);
  ASSERT_EQ(j["zero_slices"].size(), 2u);
  EXPECT_EQ(j["zero_slices"][0]["tensor"], "blocks.1.adaln_proj.linear");
  EXPECT_EQ(j["zero_slices"][0]["block"], 1);
  EXPECT_EQ(j["zero_slices"][0]["modality"], "text");
  EXPECT_EQ(j["zero_slices"][0]["slice"], "gate_mlp");
  EXPECT_EQ(j["zero_slices"][0]["row_begin"], 11 * H);
  EXPECT_EQ(j["zero_slices"][1]["tensor"], "final_layer.adaln_proj.linear");
  EXPECT_TRUE(j["zero_slices"][1]["block"].is_null());
  EXPECT_EQ(j["zero_slices"][1]["slice"], "scale");
  EXPECT_EQ(j["weight_zero_bias_nonzero_slices"][0]["slice"], "shift_msa");

  const std::string table = adaln_zero_slices_table(scan);
  EXPECT_NE(table.find("| 1 | text | gate_mlp | [2112, 2304) | 0 | 0 | weight and bias |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| final | all | scale | [192, 384) | 0 | 0 | weight and bias |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| 2 | audio | shift_msa | [2304, 2496) | 0 |"), std::string::npos) << table;
  EXPECT_NE(table.find("2 zero slices of 56"), std::string::npos) << table;
  EXPECT_NE(table.find("1 more with zero weights but a nonzero bias"), std::string::npos) << table;
  fs::remove_all(dir);
}

// The golden's adaLN weights are random draws: no slice is zero.
TEST(H3AdalnSlices, GoldenTinyHasNone) {
  const AdalnSliceScan scan = scan_adaln_slices(kTiny);
  EXPECT_EQ(scan.slices.size(), 56u);
  EXPECT_EQ(scan.zero_count(), 0);
  EXPECT_EQ(scan.constant_count(), 0);
  EXPECT_NE(adaln_zero_slices_table(scan).find("0 zero slices of 56"), std::string::npos);
  // The single file works as well as its folder.
  EXPECT_EQ(scan_adaln_slices(kTiny / "model.safetensors").slices.size(), 56u);
}

void expect_bad_input(const fs::path& path, const std::vector<std::string>& parts) {
  try {
    scan_adaln_slices(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const BadInput& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    for (const std::string& p : parts)
      EXPECT_NE(what.find(p), std::string::npos) << "message lacks '" << p << "': " << what;
  }
}

TEST(H3AdalnSlices, NotAnH3DitIsBadInput) {
  expect_bad_input(kGolden / "magi2-tiny",
                   {(kGolden / "magi2-tiny").string(), "not an H3 DiT config",
                    "expected a MiniMax-H3 DiT checkpoint"});
  expect_bad_input(kGolden / "tokenizer-qwen",
                   {"tokenizer-qwen", "no config.json", "MiniMaxH3DiTModel"});
  expect_bad_input(kGolden / "nope", {"nope", "no such file or folder"});
  // An H3 folder that lacks a block's projection names the tensor.
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("avdit_adaln_missing_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Checkpoint ckpt = Checkpoint::open(kTiny);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& n : ckpt.names())
    if (n != "blocks.2.adaln_proj.linear.bias") tensors.emplace_back(n, ckpt.get(n));
  write_safetensors(dir / "model.safetensors", tensors);
  fs::copy_file(kTiny / "config.json", dir / "config.json");
  expect_bad_input(dir, {dir.string(), "blocks.2.adaln_proj.linear.bias"});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace avdit::models::h3
