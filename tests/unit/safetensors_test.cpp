// The safetensors reader and writer: round trips, zero-copy row reads, sharded checkpoints, and
// every kind of bad file the format forbids, each rejected with a message naming file and tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "core/error.h"
#include "io/safetensors.h"

namespace avdit {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("avdit_st_{}_{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A raw file: 8-byte length, the header text, then `data` bytes.
  fs::path raw(const std::string& header, size_t data_bytes, const char* name = "raw.safetensors") {
    const fs::path p = dir_ / name;
    std::ofstream f(p, std::ios::binary);
    const uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header;
    f << std::string(data_bytes, '\x01');
    return p;
  }
  std::string error_of(const fs::path& p) {
    try {
      SafetensorsFile::open(p);
    } catch (const BadInput& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(SafetensorsTest, RoundTripKeepsBitsAndReadsRowsWithoutCopy) {
  Tensor a = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor b = a.to(DType::BF16);
  Tensor c = Tensor::from_data({2}, DType::I64, std::vector<int64_t>{-1, 1ll << 40}.data());
  using Named = std::vector<std::pair<std::string, Tensor>>;
  write_safetensors(dir_ / "x.safetensors", Named{{"a", a}, {"b.bf16", b}, {"c", c}}, {{"k", "v"}});
  auto f = SafetensorsFile::open(dir_ / "x.safetensors");
  EXPECT_EQ(f->metadata().at("k"), "v");
  Tensor ra = f->get("a");
  EXPECT_TRUE(ra.readonly());
  EXPECT_EQ(std::memcmp(ra.raw(), a.raw(), 24), 0);
  EXPECT_EQ(f->get("b.bf16").dtype(), DType::BF16);
  EXPECT_EQ(f->get("c").data<int64_t>()[1], 1ll << 40);
  Tensor rows = f->get_rows("a", 1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(std::as_const(rows).f32()[0], 3.f);
  EXPECT_EQ(rows.raw(), static_cast<const char*>(ra.raw()) + 8);  // a view into the mapping
  EXPECT_FALSE(fs::exists(dir_ / "x.safetensors.tmp"));
}

TEST_F(SafetensorsTest, ShardedCheckpointThroughIndex) {
  std::vector<TensorDecl> decls;
  for (int i = 0; i < 5; ++i) decls.push_back({fmt::format("blocks.{}.w", i), {64, 64}, DType::F32});
  write_checkpoint_sharded(dir_ / "ck", decls, [](const TensorDecl& d) {
    Tensor t = Tensor::empty(d.shape, d.dtype);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = static_cast<float>(d.name.size() + i);
    return t;
  }, 40000);
  EXPECT_TRUE(fs::exists(dir_ / "ck/model.safetensors.index.json"));
  Checkpoint ck = Checkpoint::open(dir_ / "ck");
  EXPECT_EQ(ck.names().size(), 5u);
  EXPECT_GT(ck.files().size(), 1u);
  const Tensor w4 = ck.get("blocks.4.w");
  EXPECT_EQ(w4.f32()[3], 10.f + 3);
  EXPECT_NO_THROW(ck.require("blocks.0.w", {64, 64}, DType::F32));
  try {
    ck.require("blocks.0.w", {64, 32});
    FAIL() << "a wrong shape must be rejected";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.0.w"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[64, 32]"), std::string::npos);
  }
  try {
    ck.get("blocks.9.w");
    FAIL() << "a missing tensor must be rejected";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.9.w"), std::string::npos);
  }
  // A shard named in the index but missing on disk.
  fs::remove(dir_ / "ck/model-00002-of-00003.safetensors");
  try {
    Checkpoint::open(dir_ / "ck");
    FAIL() << "a missing shard must be rejected";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("model-00002-of-00003.safetensors"), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsTest, RejectsTruncatedFiles) {
  std::ofstream(dir_ / "short.safetensors") << "abc";
  EXPECT_NE(error_of(dir_ / "short.safetensors").find("truncated"), std::string::npos);
  // Header length past the end of the file.
  EXPECT_NE(error_of(raw(std::string(10, ' '), 0).replace_filename("raw.safetensors")).size(), 0u);
  {
    const fs::path p = dir_ / "long.safetensors";
    std::ofstream f(p, std::ios::binary);
    const uint64_t n = 1000;
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << "{}";
    EXPECT_NE(error_of(p).find("truncated"), std::string::npos) << error_of(p);
  }
  // Data section shorter than the offsets say.
  const std::string h = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  const std::string e = error_of(raw(h, 8));
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, RejectsMalformedHeaders) {
  struct Case {
    std::string header;
    size_t data;
    std::string expect;  // a fragment of the message
  };
  const Case cases[] = {
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8, "malformed"},
      {R"([1,2,3])", 0, "not a JSON object"},
      {R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8, "unknown dtype 'Q4'"},
      {R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, "expected 12"},
      {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "negative"},
      {R"({"w":{"dtype":"F32","shape":[2]}})", 8, "data_offsets"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8, "'w'"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, "overlapping"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       12, "non-contiguous"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12, "trailing"},
      {R"({"__metadata__":{"x":3}})", 0, "__metadata__"},
      // Found by the fuzzer: a number out of double range made the JSON library throw
      // out_of_range instead of parse_error, which escaped as a crash.
      {R"({"w":{"dtype":"F32","shape":[1e74920],"data_offsets":[0,4]}})", 4, "malformed"},
      {R"({"w":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,8]}})", 8,
       "too large"},
  };
  for (const auto& c : cases) {
    const std::string e = error_of(raw(c.header, c.data));
    EXPECT_NE(e.find(c.expect), std::string::npos) << "header " << c.header << "\n gave: " << e;
    EXPECT_NE(e.find("raw.safetensors"), std::string::npos) << "message must name the file: " << e;
  }
}

TEST_F(SafetensorsTest, EmptyFileAndZeroElementTensors) {
  write_safetensors(dir_ / "e.safetensors", std::vector<std::pair<std::string, Tensor>>{});
  EXPECT_TRUE(SafetensorsFile::open(dir_ / "e.safetensors")->tensors().empty());
  write_safetensors(dir_ / "z.safetensors", TensorMap{{"z", Tensor::zeros({0, 3}, DType::I64)}});
  EXPECT_EQ(SafetensorsFile::open(dir_ / "z.safetensors")->get("z").shape(), (Shape{0, 3}));
}

}  // namespace
}  // namespace avdit
