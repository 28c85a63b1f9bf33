// Temporary-then-rename output files and folders (see output_file.h).
#include "io/media/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <system_error>

#include "core/error.h"

namespace avdit::media {

namespace fs = std::filesystem;

namespace {

// Failures of the environment rather than of the path the user chose.
bool is_runtime_errno(int err) {
  return err == ENOSPC || err == EDQUOT || err == EIO || err == EMFILE || err == ENFILE ||
         err == ENOMEM || err == EFBIG;
}

fs::path folder_of(const fs::path& path) {
  return path.has_parent_path() ? path.parent_path() : fs::path(".");
}

// A hidden name in the destination's folder, so that the final rename stays on one filesystem.
fs::path temp_name(const fs::path& path, std::mt19937_64& rng) {
  return folder_of(path) /
         fmt::format(".{}.avdit-{:08x}.tmp", path.filename().string(), rng() & 0xffffffffu);
}

[[noreturn]] void throw_open_error(const fs::path& path, int err, const char* what) {
  const fs::path folder = folder_of(path);
  std::string msg;
  std::error_code ec;
  if (err == ENOENT && !fs::is_directory(folder, ec))
    msg = fmt::format(
        "{}: cannot write: the folder {} does not exist; create it or choose another "
        "output path",
        path.string(), folder.string());
  else
    msg = fmt::format("{}: cannot {} in {}: {}; choose a writable output path", path.string(), what,
                      folder.string(), std::strerror(err));
  if (is_runtime_errno(err)) throw RuntimeFailure(msg);
  throw BadInput(msg);
}

}  // namespace

OutputFile::OutputFile(fs::path path, fs::path shown)
    : path_(std::move(path)), shown_(shown.empty() ? path_ : std::move(shown)) {
  std::error_code ec;
  AVDIT_REQUIRE(!path_.filename().empty() && !fs::is_directory(path_, ec),
                "{}: is a folder; give a file name for the output", shown_.string());
  std::mt19937_64 rng(std::random_device{}());
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_ = temp_name(path_, rng);
    fd_ = ::open(temp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) throw_open_error(shown_, errno, "create a file");
  }
  throw RuntimeFailure(
      fmt::format("{}: no free temporary name in {}", shown_.string(), folder_of(path_).string()));
}

OutputFile::~OutputFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(temp_.c_str());
}

int64_t OutputFile::fail(int err) {
  if (error_ == 0) error_ = err;
  return -err;
}

int64_t OutputFile::write_some(const void* data, size_t n) {
  if (error_) return -error_;  // a later write after a failure would leave a hole
  const char* p = static_cast<const char*>(data);
  size_t left = n;
  while (left > 0) {
    const ssize_t w = ::write(fd_, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      return fail(errno);
    }
    if (w == 0) return fail(EIO);
    p += w;
    left -= static_cast<size_t>(w);
  }
  return static_cast<int64_t>(n);
}

void OutputFile::write(const void* data, size_t n) {
  if (write_some(data, n) < 0)
    throw RuntimeFailure(fmt::format("{}: writing failed: {}; nothing was written", shown_.string(),
                                     std::strerror(error_)));
}

int64_t OutputFile::read_some(void* data, size_t n) {
  for (;;) {
    const ssize_t r = ::read(fd_, data, n);
    if (r >= 0) return r;
    if (errno != EINTR) return fail(errno);
  }
}

int64_t OutputFile::seek(int64_t offset, int whence) {
  const off_t r = ::lseek(fd_, static_cast<off_t>(offset), whence);
  return r < 0 ? fail(errno) : static_cast<int64_t>(r);
}

int64_t OutputFile::tell() { return seek(0, SEEK_CUR); }

int64_t OutputFile::size() {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return fail(errno);
  return static_cast<int64_t>(st.st_size);
}

void OutputFile::commit() {
  AVDIT_CHECK(!committed_ && fd_ >= 0, "OutputFile::commit called twice for {}", shown_.string());
  int err = error_;
  if (::fsync(fd_) != 0 && err == 0) err = errno;
  if (::close(fd_) != 0 && err == 0) err = errno;  // NFS and some full disks report only here
  fd_ = -1;
  if (err == 0 && ::rename(temp_.c_str(), path_.c_str()) != 0) err = errno;
  if (err != 0)
    throw RuntimeFailure(fmt::format("{}: writing failed: {}; nothing was written", shown_.string(),
                                     std::strerror(err)));
  committed_ = true;
}

OutputDir::OutputDir(fs::path dir) : dir_(std::move(dir)) {
  if (dir_.filename().empty()) dir_ = dir_.parent_path();  // "frames/" names the folder "frames"
  std::error_code ec;
  const auto st = fs::symlink_status(dir_, ec);
  if (fs::exists(st)) {
    AVDIT_REQUIRE(fs::is_directory(st), "{}: exists and is not a folder; give a new folder name",
                  dir_.string());
    AVDIT_REQUIRE(fs::is_empty(dir_, ec) && !ec,
                  "{}: the folder exists and is not empty; choose a new folder or empty it first",
                  dir_.string());
  }
  std::mt19937_64 rng(std::random_device{}());
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_ = temp_name(dir_, rng);
    if (::mkdir(temp_.c_str(), 0777) == 0) return;
    if (errno != EEXIST) throw_open_error(dir_, errno, "create a folder");
  }
  throw RuntimeFailure(
      fmt::format("{}: no free temporary name in {}", dir_.string(), folder_of(dir_).string()));
}

OutputDir::~OutputDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

void OutputDir::commit() {
  AVDIT_CHECK(!committed_, "OutputDir::commit called twice for {}", dir_.string());
  // rename(2) replaces an empty folder atomically; the constructor refused a non-empty one.
  if (::rename(temp_.c_str(), dir_.c_str()) != 0)
    throw RuntimeFailure(
        fmt::format("{}: could not move the frames into place: {}; nothing was "
                    "written",
                    dir_.string(), std::strerror(errno)));
  committed_ = true;
}

}  // namespace avdit::media
