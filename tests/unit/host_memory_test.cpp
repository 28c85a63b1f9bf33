// MemAvailable parsing and the pre-run memory check (core/host_memory.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/host_memory.h"

namespace avdit {
namespace {

TEST(HostMemory, ParsesMemAvailable) {
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("avdit-meminfo-" + std::to_string(::getpid()));
  std::ofstream(p)
      << "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:    2097152 kB\n";
  EXPECT_EQ(host_memory_available(p), int64_t{2097152} * 1024);
  std::ofstream(p) << "MemTotal: 5 kB\n";
  EXPECT_FALSE(host_memory_available(p).has_value());
  std::filesystem::remove(p);
  EXPECT_FALSE(host_memory_available(p).has_value());
  // The real file has the line on every kernel since 3.14.
  const auto real = host_memory_available();
  ASSERT_TRUE(real.has_value());
  EXPECT_GT(*real, 0);
}

TEST(HostMemory, RefusalSaysWhatIsNeededAndWhatIsThere) {
  EXPECT_NO_THROW(require_host_memory(100, int64_t{100}, "run", ""));
  EXPECT_NO_THROW(require_host_memory(int64_t{1} << 50, std::nullopt, "run", ""));
  try {
    require_host_memory(int64_t{3} << 30, int64_t{1} << 30, "this run", "latents 3.00 GiB");
    FAIL();
  } catch (const BadInput& e) {
    EXPECT_EQ(std::string(e.what()),
              "this run needs at least 3.00 GiB of host memory (latents 3.00 GiB); MemAvailable is "
              "1.00 GiB: use a "
              "smaller size or fewer steps");
  }
}

}  // namespace
}  // namespace avdit
