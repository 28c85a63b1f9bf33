// The safetensors reader against hostile files (issue 30): shapes whose byte counts would wrap,
// deep headers, FIFOs and folders in place of files, and shard indexes that point outside the
// model folder. Each case asserts the BadInput message names the file and the tensor or shard.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"

namespace avdit {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string file_bytes(const std::string& header_json, size_t data_bytes) {
  std::string h = header_json;
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(static_cast<uint64_t>(h.size()) >> (8 * i));
  return s + h + std::string(data_bytes, '\x01');
}

std::shared_ptr<SafetensorsFile> parse(const std::string& bytes) {
  auto buf = std::shared_ptr<char[]>(new char[bytes.size()]);
  std::memcpy(buf.get(), bytes.data(), bytes.size());
  return SafetensorsFile::from_memory(std::shared_ptr<const void>(buf, buf.get()), bytes.size(),
                                      "t.safetensors");
}

std::string rejection(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const BadInput& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(SafetensorsHardening, ShapesWhoseByteCountWouldWrapAreRefused) {
  // The issue's cases: [2^53 + 1, 64] F32 with 256 bytes, [2^31, 2^31] F32 in 0 bytes, a dim of
  // 2^64 - 1 (stored as -1 before), and a zero dim beside a huge one.
  const std::string cases[] = {
      R"({"x": {"dtype": "F32", "shape": [9007199254740993, 64], "data_offsets": [0, 256]}})",
      R"({"x": {"dtype": "F32", "shape": [2147483648, 2147483648], "data_offsets": [0, 0]}})",
      R"({"x": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 0]}})",
      R"({"x": {"dtype": "F32", "shape": [0, 9223372036854775807], "data_offsets": [0, 0]}})",
      R"({"x": {"dtype": "E2M1", "shape": [4611686018427387905], "data_offsets": [0, 1]}})",
      R"({"x": {"dtype": "F64", "shape": [72057594037927936, 2], "data_offsets": [0, 0]}})",
  };
  const size_t data[] = {256, 0, 0, 0, 1, 0};
  for (size_t i = 0; i < std::size(cases); ++i) {
    const std::string msg = rejection(file_bytes(cases[i], data[i]));
    EXPECT_NE(msg.find("t.safetensors: tensor 'x'"), std::string::npos)
        << cases[i] << " -> " << msg;
  }
}

TEST(SafetensorsHardening, EmptyAndOrdinaryTensorsStillLoad) {
  const auto f = parse(file_bytes(
      R"({"e": {"dtype": "F32", "shape": [0, 5], "data_offsets": [0, 0]},
          "x": {"dtype": "BF16", "shape": [3, 2], "data_offsets": [0, 12]}})",
      12));
  EXPECT_EQ(f->get("e").numel(), 0);
  EXPECT_EQ(f->get("x").nbytes(), 12);
  EXPECT_EQ(f->get_rows("x", 1, 3).shape(), (Shape{2, 2}));
}

TEST(SafetensorsHardening, DeepHeaderIsRefused) {
  const std::string deep =
      R"({"__metadata__": {"a": )" + std::string(100000, '[') + std::string(100000, ']') + "}}";
  EXPECT_NE(rejection(file_bytes(deep, 0)).find("nested deeper"), std::string::npos);
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/avdit-st-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& p, const std::string& bytes) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
  }
  fs::path dir_;
};

const std::string kShard =
    file_bytes(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 8);

void write_index(const fs::path& p, const std::string& shard) {
  std::ofstream(p) << json{{"weight_map", {{"w", shard}}}}.dump();
}

std::string open_error(const fs::path& p) {
  try {
    Checkpoint::open(p);
  } catch (const BadInput& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST_F(TempDir, IndexShardsMustStayInsideTheModelFolder) {
  const fs::path model = dir_ / "model", elsewhere = dir_ / "elsewhere";
  write(elsewhere / "x.safetensors", kShard);
  write(model / "ok.safetensors", kShard);
  // A secret file whose bytes must never appear in a message.
  write(elsewhere / "secret.safetensors", "SECRET!!" + std::string(64, 'z'));
  fs::create_symlink(elsewhere / "x.safetensors", model / "link_out.safetensors");
  fs::create_symlink(model / "ok.safetensors", model / "link_in.safetensors");
  fs::create_directories(model / "sub");
  fs::create_symlink(elsewhere, model / "sub" / "dir_out");
  const fs::path index = model / "model.safetensors.index.json";

  const std::pair<std::string, std::string> refused[] = {
      {"../elsewhere/x.safetensors", "leaves the model folder"},
      {"sub/../../elsewhere/secret.safetensors", "leaves the model folder"},
      {(elsewhere / "x.safetensors").string(), "absolute path"},
      {"/etc/passwd", "absolute path"},
      {"link_out.safetensors", "outside the model folder"},
      {"sub/dir_out/secret.safetensors", "outside the model folder"},
      {"", "is not a file name"},
  };
  for (const auto& [shard, expect] : refused) {
    write_index(index, shard);
    const std::string msg = open_error(index);
    EXPECT_NE(msg.find(expect), std::string::npos) << shard << " -> " << msg;
    EXPECT_EQ(msg.find("SECRET"), std::string::npos) << msg;
    EXPECT_EQ(open_error(model), msg);  // the folder form reads the same index
  }
  for (const std::string shard : {"ok.safetensors", "link_in.safetensors", "./ok.safetensors"}) {
    write_index(index, shard);
    EXPECT_EQ(open_error(index), "(accepted)") << shard;
    EXPECT_EQ(Checkpoint::open(index).get("w").numel(), 2);
  }
}

TEST_F(TempDir, FifosAndFoldersAreRefusedWithoutBlocking) {
  const fs::path fifo = dir_ / "model.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  write(dir_ / "config.json", "{}");
  // A FIFO opened for reading blocks until a writer comes: run in a thread and bound the wait.
  auto check = [](std::function<void()> f) {
    return std::async(std::launch::async, [f] {
      try {
        f();
      } catch (const BadInput& e) {
        return std::string(e.what());
      }
      return std::string("(accepted)");
    });
  };
  auto a = check([&] { SafetensorsFile::open(fifo); });
  auto b = check([&] { Checkpoint::open(dir_); });
  auto c = check([&] { read_json(fifo); });
  for (auto* f : {&a, &b, &c}) {
    ASSERT_EQ(f->wait_for(std::chrono::seconds(20)), std::future_status::ready)
        << "blocked on a FIFO";
    const std::string msg = f->get();
    EXPECT_NE(msg.find("model.safetensors: a FIFO, expected a regular file"), std::string::npos)
        << msg;
  }
  try {
    read_json(dir_);
    FAIL() << "expected BadInput";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("a folder, expected a regular file"), std::string::npos)
        << e.what();
  }
}

TEST_F(TempDir, ConfigMustBeAnObject) {
  write(dir_ / "model.safetensors", kShard);
  for (const char* bad : {"[1, 2]", "\"h3\"", "null"}) {
    write(dir_ / "config.json", bad);
    EXPECT_NE(open_error(dir_).find("config.json: expected a JSON object"), std::string::npos)
        << bad;
  }
  write(dir_ / "config.json", std::string(200000, '{'));
  EXPECT_NE(open_error(dir_).find("config.json: JSON nested deeper"), std::string::npos);
}

}  // namespace
}  // namespace avdit
