// Output files (io/output_file.h): unique temporary files that never follow planted symlinks, no
// temporary file left on any failure path, checks before the work (folder, same inode, writable
// folder), and outputs of one run published together even with concurrent writers.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "io/output_file.h"
#include "io/safetensors.h"

namespace avdit {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/avdit-out-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir_);
  }
  // Everything in the folder except the named files: stray temporary files.
  std::vector<std::string> strays(const std::vector<std::string>& expected) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string n = e.path().filename().string();
      if (std::find(expected.begin(), expected.end(), n) == expected.end()) out.push_back(n);
    }
    return out;
  }
  std::string message(const std::function<void()>& f) {
    try {
      f();
    } catch (const BadInput& e) {
      return e.what();
    }
    return "(accepted)";
  }
  fs::path dir_;
};

TEST_F(OutputFileTest, PublishWritesTheFileAndLeavesNoTemporary) {
  const fs::path out = dir_ / "a.bin";
  write_file_atomic(out, "hello");
  EXPECT_EQ(slurp(out), "hello");
  EXPECT_TRUE(strays({"a.bin"}).empty());
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);  // not mkstemp's 0600
}

TEST_F(OutputFileTest, FailureLeavesTheOldFileAndNoTemporary) {
  const fs::path out = dir_ / "x.safetensors";
  write_file_atomic(out, "old");
  {
    OutputFile f(out);
    f.write("partial");
    EXPECT_TRUE(fs::exists(f.temp_path()));
    // destroyed without publish: an exception unwinding through the writer
  }
  EXPECT_EQ(slurp(out), "old");
  EXPECT_TRUE(strays({"x.safetensors"}).empty());
  // The same through write_checkpoint_sharded when making a tensor throws half-way.
  const std::vector<TensorDecl> decls = {{"a", {4}, DType::F32}, {"b", {4}, DType::F32}};
  EXPECT_THROW(write_checkpoint_sharded(dir_, decls,
                                        [](const TensorDecl& d) -> Tensor {
                                          if (d.name == "b") throw std::runtime_error("boom");
                                          return Tensor::zeros({4}, DType::F32);
                                        }),
               std::runtime_error);
  EXPECT_TRUE(strays({"x.safetensors"}).empty());
}

TEST_F(OutputFileTest, PlantedSymlinksAreNeverFollowed) {
  const fs::path victim = dir_ / "victim", out = dir_ / "out.safetensors";
  std::ofstream(victim) << "precious";
  // The old writer's fixed name, and a link at the target itself.
  fs::create_symlink(victim, dir_ / "out.safetensors.tmp");
  write_safetensors(out, TensorMap{{"t", Tensor::from_floats({1, 2}, {2})}});
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(out)));
  fs::remove(out);
  fs::create_symlink(victim, out);
  write_safetensors(out, TensorMap{{"t", Tensor::from_floats({1, 2}, {2})}});
  EXPECT_EQ(slurp(victim), "precious");  // the link is replaced, its target untouched
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(out)));
  const Tensor t = read_all(out).at("t");
  EXPECT_EQ(t.f32()[1], 2.f);
}

TEST_F(OutputFileTest, ChecksBeforeTheWork) {
  const fs::path in = dir_ / "in.safetensors", link = dir_ / "hard.safetensors";
  std::ofstream(in) << "input";
  fs::create_hard_link(in, link);
  fs::create_directories(dir_ / "sub");
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  auto check = [&](const fs::path& p) {
    return message([&] { check_output_path(p, "--out", {in}); });
  };
  EXPECT_NE(check(in).find("--out " + in.string() + ": is the input file"), std::string::npos)
      << check(in);
  EXPECT_NE(check(link).find("is the input file " + in.string()), std::string::npos) << check(link);
  EXPECT_NE(check(dir_ / "sub").find("names a folder"), std::string::npos);
  EXPECT_NE(check(dir_.string() + "/sub/").find("names a folder"), std::string::npos);
  EXPECT_NE(check(dir_ / "fifo").find("is a FIFO"), std::string::npos);
  EXPECT_NE(check(dir_ / "missing" / "x").find("does not exist"), std::string::npos);
  EXPECT_NE(check(in / "x").find("is not a folder"), std::string::npos);
  // Unwritable: a read-only folder (root ignores permission bits, so /sys, read-only, stands in).
  fs::path ro = "/sys";
  if (::geteuid() != 0) {
    ro = dir_ / "ro";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  }
  EXPECT_NE(check(ro / "x.safetensors").find("cannot create files in"), std::string::npos)
      << check(ro / "x");
  EXPECT_EQ(check(dir_ / "new.safetensors"), "(accepted)");
  EXPECT_TRUE(strays({"in.safetensors", "hard.safetensors", "sub", "fifo", "ro"}).empty());
  EXPECT_EQ(slurp(in), "input");
  EXPECT_NE(message([&] {
              check_distinct_outputs(dir_ / "a", "--out", dir_ / "sub/../a", "--save-trajectory");
            }).find("are the same file"),
            std::string::npos);
}

// Runs writing the same pair of paths at once: each pair that ends up on disk comes from one run.
TEST_F(OutputFileTest, ConcurrentRunsNeverMixTheirPairs) {
  const fs::path out = dir_ / "out.bin", traj = dir_ / "traj.bin";
  std::vector<std::thread> runs;
  for (int id = 0; id < 8; ++id)
    runs.emplace_back([&, id] {
      for (int round = 0; round < 25; ++round) {
        const std::string tag = std::to_string(id) + "/" + std::to_string(round);
        OutputFile a(out), b(traj);
        a.write("out " + tag);
        b.write("traj " + tag);
        publish_together({&a, &b});
        std::this_thread::yield();
      }
    });
  for (auto& t : runs) t.join();
  EXPECT_EQ(slurp(out).substr(4), slurp(traj).substr(5));
  EXPECT_TRUE(strays({"out.bin", "traj.bin"}).empty());
}

}  // namespace
}  // namespace avdit
