// The benchmark report (src/bench/report.h): the markdown table and the JSON rows every `avdit
// bench` prints and writes, and the median the benchmarks report.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/report.h"
#include "core/error.h"

namespace avdit::bench {
namespace {

TEST(BenchTiming, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ((Timing{{5.0, 1.0, 3.0}}).median(), 3.0);
  EXPECT_DOUBLE_EQ((Timing{{4.0, 1.0, 3.0, 2.0}}).median(), 2.5);
  const Timing t{{2.0, 9.0, 4.0}};
  EXPECT_DOUBLE_EQ(t.min(), 2.0);
  EXPECT_DOUBLE_EQ(t.max(), 9.0);
  EXPECT_THROW(Timing{}.median(), Error);
}

Report sample() {
  Report r("attention");
  r.row();
  r.set("shape", std::string("preview"));
  r.set("L", int64_t{65536});
  r.set("ms", 85.1934, 2);
  r.row();
  r.set("shape", std::string("h3"));
  r.set("L", int64_t{16384});
  r.set("ms", 11.6949, 2);
  r.set("note", std::string("no LSE"));  // a column only the second row has
  return r;
}

TEST(BenchReport, MarkdownTable) {
  const std::string md = sample().markdown();
  EXPECT_EQ(md,
            "### attention\n\n"
            "| shape | L | ms | note |\n"
            "|---|---|---|---|\n"
            "| preview | 65536 | 85.19 |  |\n"
            "| h3 | 16384 | 11.69 | no LSE |\n");
}

TEST(BenchReport, JsonKeepsNumbersNumeric) {
  const nlohmann::json j = sample().json();
  EXPECT_EQ(j["title"], "attention");
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_TRUE(j["rows"][0]["L"].is_number_integer());
  EXPECT_EQ(j["rows"][0]["L"].get<int64_t>(), 65536);
  EXPECT_DOUBLE_EQ(j["rows"][0]["ms"].get<double>(), 85.1934);  // full precision, not the printed 2 digits
  EXPECT_FALSE(j["rows"][0].contains("note"));
  EXPECT_EQ(j["rows"][1]["note"], "no LSE");
}

TEST(BenchReport, EmitWritesTheJsonFileAndNoTemporary) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "avdit_bench_report_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "r.json").string();
  sample().emit(path);
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["rows"][1]["shape"], "h3");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_THROW(sample().emit((dir / "missing" / "r.json").string()), BadInput);
  std::filesystem::remove_all(dir);
}

TEST(BenchReport, SetBeforeRowIsAnError) {
  Report r("x");
  EXPECT_THROW(r.set("a", std::string("b")), Error);
}

}  // namespace
}  // namespace avdit::bench
