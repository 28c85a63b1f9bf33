// MemAvailable parsing and the memory check (see host_memory.h).
#include "core/host_memory.h"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <string>

#include "core/error.h"

namespace avdit {

std::optional<int64_t> host_memory_available(const std::filesystem::path& meminfo) {
  std::ifstream in(meminfo);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    const size_t b = line.find_first_of("0123456789");
    if (b == std::string::npos) return std::nullopt;
    int64_t kib = 0;
    const auto [end, ec] = std::from_chars(line.data() + b, line.data() + line.size(), kib);
    if (ec != std::errc() || kib < 0 || kib > (int64_t{1} << 53)) return std::nullopt;
    return kib * 1024;  // the kernel reports kB (KiB)
  }
  return std::nullopt;
}

void require_host_memory(int64_t needed, std::optional<int64_t> available, std::string_view what,
                         std::string_view breakdown) {
  if (!available || needed <= *available) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  throw BadInput(fmt::format(
      "{} needs at least {:.2f} GiB of host memory ({}); MemAvailable is {:.2f} GiB: use a smaller "
      "size or fewer steps",
      what, static_cast<double>(needed) / kGiB, breakdown, static_cast<double>(*available) / kGiB));
}

int64_t host_rss_peak() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (!line.starts_with("VmHWM:")) continue;
    int64_t kb = 0;
    const char* p = line.data() + 6;
    while (*p == ' ' || *p == '\t') ++p;
    std::from_chars(p, line.data() + line.size(), kb);
    return kb * 1024;
  }
  return 0;
}

void reset_host_rss_peak() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";  // a failure (no procfs) leaves the peak since the start, which is still a bound
}

}  // namespace avdit
