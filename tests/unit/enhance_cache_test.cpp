// The caption cache: which inputs make a new key, a stored caption read back byte for byte, nothing
// but the entry left in the folder, damaged or foreign entries read as misses, and the default
// folder from XDG_CACHE_HOME / HOME.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "pipeline/enhance/caption_cache.h"

namespace avdit::pipeline::enhance {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

class CaptionCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("avdit_caption_cache_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

CacheKey base_key() { return cache_key("a fox", "", "qwen3", "magi2-t2v-0123", 46, Sampling{}); }

TEST_F(CaptionCacheTest, EveryInputOfTheCaptionChangesTheKey) {
  Sampling s;
  std::set<std::string> keys = {base_key().sha256};
  auto add = [&](const CacheKey& k) {
    EXPECT_TRUE(keys.insert(k.sha256).second) << k.fields.dump();
  };
  add(cache_key("a fox ", "", "qwen3", "magi2-t2v-0123", 46, s));
  add(cache_key("a fox", "ab12", "qwen3", "magi2-t2v-0123", 46, s));
  add(cache_key("a fox", "", "qwen3.5", "magi2-t2v-0123", 46, s));
  add(cache_key("a fox", "", "qwen3", "magi2-t2v-0124", 46, s));
  add(cache_key("a fox", "", "qwen3", "magi2-t2v-0123", 47, s));
  Sampling t = s;
  t.temperature = 0.7;
  add(cache_key("a fox", "", "qwen3", "magi2-t2v-0123", 46, t));
  t = s;
  t.top_p = 0.9;
  add(cache_key("a fox", "", "qwen3", "magi2-t2v-0123", 46, t));
  t = s;
  t.max_tokens = 8192;
  add(cache_key("a fox", "", "qwen3", "magi2-t2v-0123", 46, t));
  t = s;
  t.thinking = true;
  add(cache_key("a fox", "", "qwen3", "magi2-t2v-0123", 46, t));
  EXPECT_EQ(base_key().sha256, base_key().sha256);
  EXPECT_EQ(base_key().sha256.size(), 64u);
}

TEST_F(CaptionCacheTest, StoreThenLoadGivesTheSameBytes) {
  const CaptionCache cache(dir_ / "nested" / "captions");
  const CacheKey key = base_key();
  EXPECT_FALSE(cache.load(key));
  const CachedCaption entry{"# global_layer\n\ncontext:é \\n x\n",
                            Json::parse(R"({"a": [1, 2.5]})")};
  ASSERT_TRUE(cache.store(key, entry, "{\"a\": [1, 2.5]}"));
  EXPECT_EQ(cache.file(key), dir_ / "nested" / "captions" / (key.sha256 + ".json"));
  const auto got = cache.load(key);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->caption, entry.caption);
  EXPECT_EQ(got->fields, entry.fields);
  // Only the entry: the temporary was renamed, not left behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(cache.dir())) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{key.sha256 + ".json"});
  // Another key misses.
  EXPECT_FALSE(cache.load(cache_key("a fox", "", "qwen3", "magi2-t2v-0123", 47, Sampling{})));
}

TEST_F(CaptionCacheTest, DamagedOrForeignEntriesAreMisses) {
  const CaptionCache cache(dir_);
  const CacheKey key = base_key();
  ASSERT_TRUE(cache.store(key, {"caption\n", Json::object()}, ""));
  // Truncated by a crash of some other writer.
  fs::resize_file(cache.file(key), 20);
  EXPECT_FALSE(cache.load(key));
  // A well-formed entry stored under this name for another key.
  const CacheKey other = cache_key("a cat", "", "qwen3", "magi2-t2v-0123", 46, Sampling{});
  ASSERT_TRUE(cache.store(other, {"other\n", Json::object()}, ""));
  fs::copy_file(cache.file(other), cache.file(key), fs::copy_options::overwrite_existing);
  EXPECT_FALSE(cache.load(key));
  ASSERT_TRUE(cache.load(other));
}

TEST_F(CaptionCacheTest, AnUnwritableFolderIsAWarningNotAnError) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  const CaptionCache cache(dir_ / "file" / "captions");  // a path through a regular file
  EXPECT_FALSE(cache.store(base_key(), {"c\n", Json::object()}, ""));
  EXPECT_FALSE(cache.load(base_key()));
}

TEST(CaptionCacheDir, FollowsXdgThenHome) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string saved_xdg = xdg ? xdg : "", saved_home = home ? home : "";
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(default_cache_dir(), fs::path("/x/cache/avdit/captions"));
  ::setenv("XDG_CACHE_HOME", "relative", 1);  // the XDG spec: relative paths are ignored
  EXPECT_EQ(default_cache_dir(), fs::path("/home/u/.cache/avdit/captions"));
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_cache_dir(), fs::path("/home/u/.cache/avdit/captions"));
  ::unsetenv("HOME");
  EXPECT_FALSE(default_cache_dir());
  if (xdg) ::setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  if (home) ::setenv("HOME", saved_home.c_str(), 1);
}

}  // namespace
}  // namespace avdit::pipeline::enhance
