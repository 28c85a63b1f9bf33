// Regular-file checks before any read (see regular_file.h). open() uses O_NONBLOCK because a FIFO
// opened for reading blocks until a writer appears; fstat then refuses everything but a regular
// file, so no read or mmap ever waits on one.
#include "io/regular_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace avdit {

namespace fs = std::filesystem;

namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// An open descriptor of a regular file and its size; BadInput otherwise.
int open_regular(const fs::path& path, uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) throw BadInput(fmt::format("{}: no such file", path.string()));
    throw BadInput(fmt::format("{}: cannot open: {}", path.string(), std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const mode_t mode = st.st_mode;
    ::close(fd);
    throw BadInput(fmt::format("{}: {}, expected a regular file", path.string(), kind_of(mode)));
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

}  // namespace

MappedFile map_regular_file(const fs::path& path) {
  MappedFile m;
  const Fd fd(open_regular(path, &m.size));
  if (m.size == 0) {
    m.data = std::shared_ptr<const void>(
        new char[1]{}, [](const void* p) { delete[] static_cast<const char*>(p); });
    return m;
  }
  void* p = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED)
    throw BadInput(fmt::format("{}: cannot map: {}", path.string(), std::strerror(errno)));
  const uint64_t bytes = m.size;
  m.data = std::shared_ptr<const void>(
      p, [bytes](const void* q) { ::munmap(const_cast<void*>(q), bytes); });
  return m;
}

std::string read_regular_file(const fs::path& path, uint64_t max_bytes, std::string_view what) {
  uint64_t size = 0;
  const Fd fd(open_regular(path, &size));
  AVDIT_REQUIRE(size <= max_bytes, "{}: {} bytes, more than the {}-byte limit for {}",
                path.string(), size, max_bytes, what);
  std::string s(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd.get(), s.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw BadInput(fmt::format("{}: cannot read: {}", path.string(), std::strerror(errno)));
    if (n == 0) break;  // shrank while reading
    done += static_cast<uint64_t>(n);
  }
  s.resize(done);
  return s;
}

}  // namespace avdit
