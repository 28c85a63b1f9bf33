// safetensors checkpoints: a validating, memory-mapped reader for single files, sharded
// checkpoints (*.safetensors.index.json) and model folders, and a writer whose files the Python
// `safetensors` package reads back bit-exactly. Every rejection names the file and the tensor.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace avdit {

class OutputFile;  // io/output_file.h

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;  // byte offsets inside the data section
};

class SafetensorsFile {
 public:
  // Maps and validates the whole header; throws BadInput naming the file (and tensor).
  static std::shared_ptr<SafetensorsFile> open(const std::filesystem::path& path);
  // The same validation over bytes already in memory (`name` is used in messages); the fuzzer's
  // entry point.
  static std::shared_ptr<SafetensorsFile> from_memory(std::shared_ptr<const void> bytes, uint64_t size,
                                                      const std::filesystem::path& name);
  // A file of another format whose tensors are contiguous byte ranges of `bytes` (PyTorch's zip
  // checkpoints, io/torch_checkpoint.h): begin/end are offsets into `bytes`; ranges may overlap
  // (tensors sharing a storage). BadInput for a range outside `bytes`, a size that disagrees
  // with the shape, or a name given twice.
  static std::shared_ptr<SafetensorsFile> from_views(
      std::shared_ptr<const void> bytes, uint64_t size, const std::filesystem::path& name,
      std::vector<TensorInfo> tensors, std::map<std::string, std::string> metadata = {});

  const std::filesystem::path& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in offset order
  const TensorInfo* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Zero-copy views of the mapping (a copy only if the data is misaligned for its dtype).
  Tensor get(std::string_view name) const;
  Tensor get_rows(std::string_view name, int64_t begin, int64_t end) const;

 private:
  Tensor view(const TensorInfo& info, uint64_t byte_begin, Shape shape) const;

  std::filesystem::path path_;
  std::shared_ptr<const void> mapping_;  // the whole file
  const char* data_ = nullptr;           // start of the data section
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint: one .safetensors file, a *.safetensors.index.json with its shards, a PyTorch
// checkpoint (.pth/.pt/.ckpt, torch.save's zip format, read unchanged by io/torch_checkpoint.h),
// or a folder holding either (and usually config.json).
class Checkpoint {
 public:
  // Which tensors a model reads, by name (empty: all).
  using Wanted = std::function<bool(std::string_view name)>;
  // With `wanted`, only wanted tensors are listed, and a sharded checkpoint maps only the shards
  // that hold one (the rest of its index is not checked): a model that uses part of a larger
  // checkpoint (a text encoder's first K layers) never opens the shards of the other layers.
  static Checkpoint open(const std::filesystem::path& path, const Wanted& wanted = {});
  // Whether open(folder) would find weights there: a .safetensors file or index, or a PyTorch
  // checkpoint (a folder of configs alone, as `avdit init --configs-only` writes, has none).
  static bool folder_has_weights(const std::filesystem::path& dir);

  std::vector<std::string> names() const;
  bool contains(std::string_view name) const;
  const TensorInfo& info(std::string_view name) const;  // BadInput if absent
  Tensor get(std::string_view name) const;
  Tensor get_rows(std::string_view name, int64_t begin, int64_t end) const;
  // The tensor, checked against the shape (and dtype) the model expects.
  Tensor require(std::string_view name, const Shape& expected,
                 std::optional<DType> dtype = std::nullopt) const;
  const nlohmann::json* config() const { return config_ ? &*config_ : nullptr; }
  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& source() const { return source_; }
  const std::vector<std::shared_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  const SafetensorsFile& file_of(std::string_view name) const;

  std::filesystem::path source_, dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t, std::less<>> where_;  // tensor name -> file
  std::optional<nlohmann::json> config_;
};

// Reads a JSON file (configs, indexes): BadInput on a missing file, one that is not a regular
// file, larger than 64 MiB, nested deeper than kMaxJsonDepth or malformed.
nlohmann::json read_json(const std::filesystem::path& path);

// Every tensor of one file, zero-copy.
TensorMap read_all(const std::filesystem::path& path);

// Writes CPU tensors in the given order; atomic (a temporary file renamed into place), so a failed
// write leaves nothing behind.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
void write_safetensors(const std::filesystem::path& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// Into an OutputFile that the caller publishes, alone or with other outputs of the same run
// (publish_together in io/output_file.h).
void write_safetensors(OutputFile& out, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Writes a checkpoint folder: model.safetensors when it fits in one shard, else
// model-0000k-of-0000n.safetensors plus model.safetensors.index.json. Tensors are made one at a
// time by `make`, so a checkpoint larger than memory can be written.
struct TensorDecl {
  std::string name;
  Shape shape;
  DType dtype;
};
void write_checkpoint_sharded(const std::filesystem::path& dir, const std::vector<TensorDecl>& decls,
                              const std::function<Tensor(const TensorDecl&)>& make,
                              int64_t max_shard_bytes = int64_t{4} << 30);

}  // namespace avdit
