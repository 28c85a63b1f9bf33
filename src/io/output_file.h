// Every file avdit writes goes through here: a unique temporary file beside the target (mkstemp,
// so a planted symlink or a concurrent run cannot redirect or mix the data), fsync, rename; the
// temporary file is removed on every failure path. Output paths are checked before the work starts.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace avdit {

// Checks an output path before any work: BadInput naming `option` (e.g. "--out") when the path
// names a folder, exists as something other than a regular file, lies in a missing or unwritable
// folder, or is the same file (by inode) as one of `inputs`.
void check_output_path(const std::filesystem::path& path, std::string_view option,
                       const std::vector<std::filesystem::path>& inputs);

// Two outputs of one run must be distinct files: BadInput naming both options otherwise.
void check_distinct_outputs(const std::filesystem::path& a, std::string_view option_a,
                            const std::filesystem::path& b, std::string_view option_b);

// One output being written. The constructor creates ".<name>.XXXXXX.tmp" in the target's folder;
// the destructor removes it unless publish() (or publish_together) renamed it into place.
class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // RuntimeFailure naming the target when the write fails (disk full, I/O error).
  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Flushes the data to disk (fsync) and closes the temporary file; publish() calls it.
  void finish();
  // Renames the temporary file over the target and syncs the folder.
  void publish();

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temp_path() const { return temp_; }

 private:
  friend void publish_together(const std::vector<OutputFile*>& files);
  void rename_into_place();

  std::filesystem::path path_, temp_;
  int fd_ = -1;
  bool finished_ = false, published_ = false;
};

// Publishes the outputs of one run (e.g. the final latents and the trajectory) so that a kill never
// leaves a new one beside an old one, and two runs writing the same paths never mix their files:
//   1. finish() each file (all data durable in the temporary files);
//   2. take an exclusive flock on each target folder (in a fixed order), serialising with any other
//      avdit publishing there;
//   3. remove every existing target, then rename the temporary files in the order given.
// A kill before 3 leaves the old files (and stray temporary files); during 3, some new files and
// no old ones; after, all new ones.
void publish_together(const std::vector<OutputFile*>& files);

// A whole small file (a JSON index or report) written through an OutputFile and published.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

}  // namespace avdit
