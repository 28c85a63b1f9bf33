// Opening user files safely: only regular files (a FIFO, a device or a folder is refused without
// blocking), with sizes bounded before anything is read. Every file reader of avdit goes through
// here; errors name the file and say what to pass instead.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace avdit {

struct MappedFile {
  std::shared_ptr<const void> data;  // the whole file, read-only (a 1-byte buffer when empty)
  uint64_t size = 0;
};

// Memory-maps a regular file. BadInput when it is missing, unreadable or not a regular file.
MappedFile map_regular_file(const std::filesystem::path& path);

// Reads a regular file of at most `max_bytes` bytes. `what` says what the file should hold.
std::string read_regular_file(const std::filesystem::path& path, uint64_t max_bytes,
                              std::string_view what);

// JSON files (configs, shard indexes) above this size are refused before reading.
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{64} << 20;

}  // namespace avdit
