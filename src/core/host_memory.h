// Host memory available to a run (Linux /proc/meminfo MemAvailable), so that a run too large for
// the machine is refused before it allocates, with what it needs and what is there.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

namespace avdit {

// MemAvailable in bytes; nullopt when the file is missing or has no such line.
std::optional<int64_t> host_memory_available(
    const std::filesystem::path& meminfo = "/proc/meminfo");

// BadInput "WHAT needs at least N GiB of host memory (BREAKDOWN); MemAvailable is M GiB" when
// `needed` exceeds `available` (unknown availability passes).
void require_host_memory(int64_t needed, std::optional<int64_t> available, std::string_view what,
                         std::string_view breakdown);

// The process's peak resident set (VmHWM of /proc/self/status) in bytes, 0 when unknown, and its
// reset (writing 5 to /proc/self/clear_refs), so that each stage of a pipeline reports its own peak.
int64_t host_rss_peak();
void reset_host_rss_peak();

}  // namespace avdit
