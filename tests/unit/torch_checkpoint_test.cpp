// The PyTorch checkpoint reader (io/torch_checkpoint.h) on tests/fixtures/torch, made by
// tests/tools/write_torch_checkpoint.py in torch.save's layout (no torch is installed here, so the
// files imitate torch's output opcode for opcode; the script says how): every dtype, views of
// shared storages, 0-d and empty tensors, unaligned records under another prefix, ZIP64, MAGI-2's
// ema_state_dict wrapping with 'module.' names, Checkpoint reading a release folder; and refusals
// naming the file: a transposed tensor, one past its storage, big-endian data, a deflated record,
// an os.system import, an unknown opcode, the legacy format, and (fuzz-style) every truncation and
// a few thousand seeded byte mutations, each refused by BadInput or read in bounds, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "testing/compare.h"

namespace avdit {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const char* name) {
  return fs::path(AVDIT_SOURCE_DIR) / "tests" / "fixtures" / "torch" / name;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::shared_ptr<SafetensorsFile> parse(const std::string& bytes, const char* name = "m.pth") {
  auto buf = std::shared_ptr<char[]>(new char[bytes.size() + 1]);
  std::memcpy(buf.get(), bytes.data(), bytes.size());
  return torch_checkpoint_from_memory(std::shared_ptr<const void>(buf, buf.get()), bytes.size(),
                                      name);
}

std::vector<float> floats(const Tensor& t) {
  const Tensor f = t.to_f32();
  return std::vector<float>(f.f32(), f.f32() + f.numel());
}

TEST(TorchCheckpoint, TinyStateDictReadsEveryDtypeAndView) {
  const auto f = open_torch_checkpoint(fixture("tiny.pth"));
  EXPECT_EQ(f->metadata().at("format"), "pytorch");
  EXPECT_EQ(f->tensors().size(), 10u);
  auto get = [&](const char* n) { return f->get(n); };
  EXPECT_EQ(get("a").shape(), (Shape{2, 3}));
  EXPECT_EQ(get("a").dtype(), DType::F32);
  EXPECT_EQ(floats(get("a")), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(get("b").dtype(), DType::BF16);
  EXPECT_EQ(floats(get("b")), (std::vector<float>{1, 2, 3, -1}));
  EXPECT_EQ(get("c").dtype(), DType::F16);
  EXPECT_EQ(floats(get("c")), (std::vector<float>{0.5f, -2, 3, 4}));
  // Three views of one storage of 10..19: offsets 3 and 7, and a [3, 1] column whose size-1
  // dimension has an odd stride.
  EXPECT_EQ(floats(get("view")), (std::vector<float>{13, 14, 15, 16}));
  EXPECT_EQ(floats(get("view2")), (std::vector<float>{17, 18, 19}));
  EXPECT_EQ(get("column").shape(), (Shape{3, 1}));
  EXPECT_EQ(floats(get("column")), (std::vector<float>{10, 11, 12}));
  const Tensor d = get("d");
  ASSERT_EQ(d.dtype(), DType::I64);
  EXPECT_EQ(d.data<int64_t>()[0], -1);
  EXPECT_EQ(d.data<int64_t>()[1], int64_t{1} << 40);
  EXPECT_EQ(get("scalar").shape(), Shape{});
  EXPECT_EQ(floats(get("scalar")), std::vector<float>{42});
  EXPECT_EQ(get("empty").shape(), (Shape{0, 5}));
  const Tensor u8 = get("u8");
  ASSERT_EQ(u8.dtype(), DType::U8);
  EXPECT_EQ(u8.data<uint8_t>()[2], 255);
}

// Records without torch's 64-byte alignment (copied, not viewed) under the file stem as the
// archive's folder (torch before 2.0), and an archive in ZIP64 form (every central directory
// field saturated, the sizes and offsets in ZIP64 extra fields and record), read the same.
TEST(TorchCheckpoint, UnalignedRecordsAnotherPrefixAndZip64ReadTheSame) {
  const TensorMap a = read_torch_checkpoint(fixture("tiny.pth"));
  for (const char* other : {"tiny_unaligned.pt", "tiny_zip64.pth"}) {
    const TensorMap b = read_torch_checkpoint(fixture(other));
    ASSERT_EQ(a.size(), b.size()) << other;
    for (const auto& [name, t] : a) {
      ASSERT_TRUE(b.count(name)) << other << " " << name;
      EXPECT_TRUE(test_util::same_bits(t, b.at(name))) << other << " " << name;
    }
  }
}

// MAGI-2's get_turbo_vaed: ema_state_dict over state_dict, 'module.' stripped; the other entries
// (a step, a float, a 2^62 integer, a list) parse and are left out.
TEST(TorchCheckpoint, WrappedCheckpointPicksEmaStateDictAndStripsModule) {
  const auto f = open_torch_checkpoint(fixture("wrapped.ckpt"));
  EXPECT_EQ(f->metadata().at("state_dict"), "ema_state_dict");
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(floats(f->get("decoder.w")), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(floats(f->get("decoder.b")), (std::vector<float>{5, 6}));
}

std::string refusal(const fs::path& p) {
  try {
    open_torch_checkpoint(p);
  } catch (const BadInput& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(TorchCheckpoint, RefusedFilesNameTheFileAndTheReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"transposed.pth", "not contiguous"},
      {"past_end.pth", "reads element 6 of storage '0', which has 6"},
      {"negative_offset.pth", "a tensor at offset -1 of storage '0'"},
      {"big_endian.pth", "byte order 'big'"},
      {"deflated.pth", "compressed (method 8)"},
      {"evil_global.pth", "imports os.system"},
      {"unknown_opcode.pth", "opcode 0x69 ('i')"},
      {"legacy.pt", "legacy format"},
  };
  for (const auto& [file, says] : cases) {
    const std::string msg = refusal(fixture(file));
    EXPECT_NE(msg.find(file), std::string::npos) << file << ": " << msg;
    EXPECT_NE(msg.find(says), std::string::npos) << file << ": " << msg;
  }
}

// Every prefix of a valid file is refused (the central directory is at the end); seeded random
// mutations of 1-4 bytes (half of them inside data.pkl) are refused with BadInput or read with
// every tensor inside the file. Under the sanitizers (CI's ASan build) an out-of-bounds read fails.
TEST(TorchCheckpoint, TruncationsAndMutationsAreRefusedOrReadInBounds) {
  for (const char* file : {"tiny.pth", "wrapped.ckpt", "tiny_zip64.pth"}) {
    const std::string good = bytes_of(fixture(file));
    for (size_t n = 0; n < good.size(); ++n)
      EXPECT_THROW(parse(good.substr(0, n)), BadInput) << file << " cut at " << n;
    std::mt19937 rng(20261203);
    int accepted = 0;
    for (int i = 0; i < 1500; ++i) {
      std::string m = good;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) {
        // data.pkl is the first record: its bytes start after a 30 + 16 + padding byte header.
        const size_t at = rng() % 2 ? 64 + rng() % 700 : rng() % m.size();
        m[at % m.size()] = static_cast<char>(rng());
      }
      try {
        const auto f = parse(m);
        for (const TensorInfo& t : f->tensors()) f->get(t.name).to_f32();
        ++accepted;
      } catch (const BadInput&) {
      }
    }
    std::printf("  %s: %d of 1500 mutations still read\n", file, accepted);
  }
}

// Checkpoint reads a release folder that holds one PyTorch checkpoint (the MAGI-2 release's vae/
// and turbo_vae/); two are refused; a safetensors file beside one wins.
TEST(TorchCheckpoint, CheckpointOpensAFolderHoldingOneCheckpoint) {
  const fs::path tmp = fs::temp_directory_path() / ("torch_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  fs::copy_file(fixture("wrapped.ckpt"), tmp / "checkpoint.ckpt");
  const Checkpoint c =
      Checkpoint::open(tmp, [](std::string_view n) { return n.starts_with("decoder.w"); });
  EXPECT_EQ(c.names(), std::vector<std::string>{"decoder.w"});
  EXPECT_EQ(c.info("decoder.w").shape, (Shape{2, 2}));
  EXPECT_EQ(floats(c.require("decoder.w", {2, 2}, DType::F32)), (std::vector<float>{1, 2, 3, 4}));
  fs::copy_file(fixture("tiny.pth"), tmp / "other.pth");
  try {
    Checkpoint::open(tmp);
    ADD_FAILURE() << "a folder with two PyTorch checkpoints was read";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("point at the one to use"), std::string::npos) << e.what();
  }
  write_safetensors(tmp / "model.safetensors", std::vector<std::pair<std::string, Tensor>>{
                                                   {"x", Tensor::zeros({2}, DType::F32)}});
  EXPECT_EQ(Checkpoint::open(tmp).names(), std::vector<std::string>{"x"});
  // A file path to a PyTorch checkpoint works as well.
  EXPECT_EQ(Checkpoint::open(tmp / "other.pth").names().size(), 10u);
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace avdit
