// Output files and folders that appear whole or not at all: everything is written under a
// temporary name in the destination's folder and renamed into place only after every write, the
// fsync and the close succeeded. On any failure (a full disk too) the temporary is removed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace avdit::media {

class OutputFile {
 public:
  // Creates the temporary file beside `path`. BadInput (exit 2) when `path` is a folder or its
  // folder cannot take a new file (missing, read-only, not a folder). Messages name `shown`
  // (default: `path`), e.g. the final name of a file written inside an OutputDir.
  explicit OutputFile(std::filesystem::path path, std::filesystem::path shown = {});
  ~OutputFile();  // removes the temporary unless commit() succeeded
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temp_path() const { return temp_; }

  // Writes all `n` bytes or throws RuntimeFailure naming the destination.
  void write(const void* data, size_t n);

  // For C libraries' I/O callbacks, which must not throw: each returns a negative errno on
  // failure and remembers the first failure, which commit() reports.
  int64_t write_some(const void* data, size_t n);  // all n bytes, or -errno
  int64_t read_some(void* data, size_t n);         // bytes read (0 at the end), or -errno
  int64_t seek(int64_t offset, int whence);        // new position, or -errno
  int64_t tell();
  int64_t size();
  int first_error() const { return error_; }

  // fsync, close and rename onto path(); throws RuntimeFailure (and removes the temporary) if any
  // step or any earlier write failed.
  void commit();

 private:
  int64_t fail(int err);

  std::filesystem::path path_, shown_, temp_;
  int fd_ = -1;
  int error_ = 0;
  bool committed_ = false;
};

// A folder filled under a temporary name and renamed into place by commit(). The destination must
// not exist or be an empty folder (BadInput otherwise), so a rerun never mixes old and new files.
class OutputDir {
 public:
  explicit OutputDir(std::filesystem::path dir);
  ~OutputDir();  // removes the temporary folder and what is in it unless commit() succeeded
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  // An OutputFile for dir() / name, written into the temporary folder.
  std::unique_ptr<OutputFile> open(const std::filesystem::path& name) const {
    return std::make_unique<OutputFile>(temp_ / name, dir_ / name);
  }
  void commit();

 private:
  std::filesystem::path dir_, temp_;
  bool committed_ = false;
};

}  // namespace avdit::media
