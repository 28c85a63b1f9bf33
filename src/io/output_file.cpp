// Output files: checks before the work, unique temporary files, fsync, rename (see output_file.h).
#include "io/output_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "core/error.h"

namespace avdit {

namespace fs = std::filesystem;

namespace {

fs::path folder_of(const fs::path& path) {
  const fs::path parent = path.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

bool names_a_folder(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.empty() || name == "." || name == "..";
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Errors of creating a file that the user can fix (permissions, a missing or read-only folder).
bool user_fixable(int err) {
  return err == EACCES || err == EPERM || err == EROFS || err == ENOENT || err == ENOTDIR ||
         err == ENAMETOOLONG;
}

// The process umask without changing it (umask(2) can only set it): new outputs get the usual
// 0666 & ~umask rather than mkstemp's 0600.
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Umask:", 0) == 0)
      return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  return 022;
}

// ".<name>.XXXXXX.tmp" beside the target; long names are cut so the temporary name stays within
// NAME_MAX. Returns the open descriptor and fills `temp`, or -1 with errno set.
int make_temp(const fs::path& target, fs::path* temp) {
  std::string name = target.filename().string();
  if (name.size() > 200) name.resize(200);
  std::string tmpl = (folder_of(target) / ("." + name + ".XXXXXX.tmp")).string();
  const int fd = ::mkostemps(tmpl.data(), 4, O_CLOEXEC);
  if (fd >= 0) *temp = tmpl;
  return fd;
}

void sync_folder(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);  // best effort: the rename itself has happened either way
  ::close(fd);
}

}  // namespace

void check_output_path(const fs::path& path, std::string_view option,
                       const std::vector<fs::path>& inputs) {
  AVDIT_REQUIRE(!path.empty(), "{}: empty path; give a file name", option);
  AVDIT_REQUIRE(!names_a_folder(path), "{} {}: names a folder; give a file name inside it", option,
                path.string());
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    AVDIT_REQUIRE(!S_ISDIR(st.st_mode), "{} {}: names a folder; give a file name inside it", option,
                  path.string());
    AVDIT_REQUIRE(S_ISREG(st.st_mode), "{} {}: exists and is {}; avdit writes regular files only",
                  option, path.string(), kind_of(st.st_mode));
    for (const fs::path& in : inputs) {
      struct stat si {};
      if (in.empty() || ::stat(in.c_str(), &si) != 0) continue;
      AVDIT_REQUIRE(!(si.st_dev == st.st_dev && si.st_ino == st.st_ino),
                    "{} {}: is the input file {} (same inode); write the output elsewhere", option,
                    path.string(), in.string());
    }
  }
  const fs::path folder = folder_of(path);
  struct stat sf {};
  AVDIT_REQUIRE(::stat(folder.c_str(), &sf) == 0,
                "{} {}: folder {} does not exist; create it first", option, path.string(),
                folder.string());
  AVDIT_REQUIRE(S_ISDIR(sf.st_mode), "{} {}: {} is not a folder", option, path.string(),
                folder.string());
  // The only reliable test of writability (permissions, read-only mounts, ACLs) is to create a
  // file.
  fs::path probe;
  const int fd = make_temp(path, &probe);
  if (fd < 0) {
    const int err = errno;
    throw BadInput(fmt::format("{} {}: cannot create files in {}: {}", option, path.string(),
                               folder.string(), std::strerror(err)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

void check_distinct_outputs(const fs::path& a, std::string_view option_a, const fs::path& b,
                            std::string_view option_b) {
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  bool same = !ea && !eb && ca == cb;
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
    same = same || (sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
  AVDIT_REQUIRE(!same, "{} {} and {} {} are the same file; give two different paths", option_a,
                a.string(), option_b, b.string());
}

OutputFile::OutputFile(fs::path path) : path_(std::move(path)) {
  AVDIT_REQUIRE(!names_a_folder(path_), "{}: names a folder; give a file name", path_.string());
  fd_ = make_temp(path_, &temp_);
  if (fd_ < 0) {
    const int err = errno;
    const std::string msg = fmt::format("{}: cannot create a file in {}: {}", path_.string(),
                                        folder_of(path_).string(), std::strerror(err));
    if (user_fixable(err)) throw BadInput(msg);
    throw RuntimeFailure(msg);
  }
  ::fchmod(fd_, 0666 & ~current_umask());
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!published_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void OutputFile::write(const void* data, size_t bytes) {
  AVDIT_CHECK(fd_ >= 0 && !finished_, "{}: write after finish", path_.string());
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, std::min<size_t>(bytes, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw RuntimeFailure(fmt::format("{}: write failed: {}", path_.string(),
                                       n < 0 ? std::strerror(errno) : "no progress"));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void OutputFile::finish() {
  if (finished_) return;
  const int fd = fd_;
  fd_ = -1;
  int err = ::fsync(fd) == 0 ? 0 : errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0)
    throw RuntimeFailure(fmt::format("{}: write failed: {}", path_.string(), std::strerror(err)));
  finished_ = true;
}

void OutputFile::rename_into_place() {
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    throw RuntimeFailure(fmt::format("{}: cannot rename {} into place: {}", path_.string(),
                                     temp_.string(), std::strerror(errno)));
  published_ = true;
}

void OutputFile::publish() { publish_together({this}); }

void publish_together(const std::vector<OutputFile*>& files) {
  for (OutputFile* f : files) f->finish();
  // One lock per folder, taken in (device, inode) order so two runs cannot deadlock.
  struct Folder {
    dev_t dev;
    ino_t ino;
    fs::path path;
    int fd;
  };
  std::vector<Folder> folders;
  auto release = [&folders] {
    for (const Folder& d : folders)
      if (d.fd >= 0) ::close(d.fd);  // closing drops the flock
  };
  try {
    for (OutputFile* f : files) {
      const fs::path folder = folder_of(f->path());
      const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      struct stat st {};
      if (fd < 0 || ::fstat(fd, &st) != 0) {
        const int err = errno;
        if (fd >= 0) ::close(fd);
        throw RuntimeFailure(
            fmt::format("{}: cannot open its folder: {}", f->path().string(), std::strerror(err)));
      }
      const bool seen = std::any_of(folders.begin(), folders.end(), [&](const Folder& d) {
        return d.dev == st.st_dev && d.ino == st.st_ino;
      });
      if (seen) {
        ::close(fd);
        continue;
      }
      folders.push_back({st.st_dev, st.st_ino, folder, fd});
    }
    std::sort(folders.begin(), folders.end(), [](const Folder& a, const Folder& b) {
      return std::pair(a.dev, a.ino) < std::pair(b.dev, b.ino);
    });
    for (const Folder& d : folders)
      while (::flock(d.fd, LOCK_EX) != 0)
        if (errno != EINTR)
          throw RuntimeFailure(
              fmt::format("{}: cannot lock the folder: {}", d.path.string(), std::strerror(errno)));
    if (files.size() > 1)
      for (OutputFile* f : files)
        if (::unlink(f->path().c_str()) != 0 && errno != ENOENT)
          throw RuntimeFailure(fmt::format("{}: cannot replace the old file: {}",
                                           f->path().string(), std::strerror(errno)));
    for (OutputFile* f : files) f->rename_into_place();
    for (const Folder& d : folders) sync_folder(d.path);
  } catch (...) {
    release();
    throw;
  }
  release();
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  OutputFile f(path);
  f.write(bytes);
  f.publish();
}

}  // namespace avdit
