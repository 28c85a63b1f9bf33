// safetensors reader, checkpoint folders and writer (see safetensors.h).
// The format: 8 bytes little-endian header length N, N bytes of JSON, then the data section.
// Each tensor entry is {"dtype", "shape", "data_offsets": [begin, end]} relative to the data
// section; entries must tile the data section exactly, in order, with no gap or overlap.
#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <system_error>
#include <tuple>

#include "core/checked.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "io/output_file.h"
#include "io/regular_file.h"
#include "io/torch_checkpoint.h"

namespace avdit {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The Python implementation refuses headers above 100 MB; so do we.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const fs::path& path) {
  MappedFile m = map_regular_file(path);
  return from_memory(std::move(m.data), m.size, path);
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::from_memory(std::shared_ptr<const void> bytes_owner,
                                                              uint64_t size, const fs::path& path) {
  auto f = std::make_shared<SafetensorsFile>();
  f->path_ = path;
  f->mapping_ = std::move(bytes_owner);
  const std::string where = path.string();
  const auto* bytes = static_cast<const unsigned char*>(f->mapping_.get());
  AVDIT_REQUIRE(size >= 8, "{}: truncated: {} bytes, a safetensors file needs at least 8", where, size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  AVDIT_REQUIRE(n <= kMaxHeaderBytes, "{}: header length {} exceeds the {}-byte limit (not a safetensors file?)",
                where, n, kMaxHeaderBytes);
  AVDIT_REQUIRE(8 + n <= size, "{}: truncated: header says {} bytes but the file has only {} after the length",
                where, n, size - 8);
  const char* header = reinterpret_cast<const char*>(bytes + 8);
  AVDIT_REQUIRE(n >= 2 && header[0] == '{', "{}: header is not a JSON object", where);
  const json j = parse_json(std::string_view(header, n), where + " (header)");
  AVDIT_REQUIRE(j.is_object(), "{}: header is not a JSON object", where);
  const uint64_t data_size = size - 8 - n;
  f->data_ = header + n;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == "__metadata__") {
      AVDIT_REQUIRE(e.is_object(), "{}: __metadata__ must be an object of strings", where);
      for (auto m = e.begin(); m != e.end(); ++m) {
        AVDIT_REQUIRE(m.value().is_string(), "{}: __metadata__['{}'] is not a string", where, m.key());
        f->metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    AVDIT_REQUIRE(e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"),
                  "{}: tensor '{}': entry needs dtype, shape and data_offsets", where, name);
    AVDIT_REQUIRE(e["dtype"].is_string(), "{}: tensor '{}': dtype is not a string", where, name);
    const std::string dname = e["dtype"].get<std::string>();
    const auto dtype = dtype_from_name(dname);
    AVDIT_REQUIRE(dtype.has_value(), "{}: tensor '{}': unknown dtype '{}'", where, name, dname);
    AVDIT_REQUIRE(e["shape"].is_array(), "{}: tensor '{}': shape is not an array", where, name);
    Shape shape;
    for (const auto& d : e["shape"]) {
      AVDIT_REQUIRE(d.is_number_unsigned(),
                    "{}: tensor '{}': shape has a non-integer or negative dimension", where, name);
      const uint64_t v = d.get<uint64_t>();
      AVDIT_REQUIRE(v <= static_cast<uint64_t>(checked::kMaxElements),
                    "{}: tensor '{}': shape too large: dimension {} exceeds the 2^56 limit", where,
                    name, v);
      shape.push_back(static_cast<int64_t>(v));
    }
    // Element and byte counts without wrap: a zero dimension does not excuse a huge one.
    const std::optional<int64_t> numel = checked::numel(shape);
    AVDIT_REQUIRE(numel.has_value(), "{}: tensor '{}': shape {} too large: more than 2^56 elements",
                  where, name, shape_str(shape));
    const int64_t expect = *checked::nbytes(*numel, dtype_bits(*dtype));
    const json& off = e["data_offsets"];
    AVDIT_REQUIRE(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                      off[1].is_number_unsigned(),
                  "{}: tensor '{}': data_offsets must be two non-negative integers", where, name);
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    AVDIT_REQUIRE(b <= en && en <= data_size,
                  "{}: tensor '{}': data_offsets [{}, {}] fall outside the {}-byte data section "
                  "(truncated file?)",
                  where, name, b, en, data_size);
    AVDIT_REQUIRE(en - b == static_cast<uint64_t>(expect),
                  "{}: tensor '{}': {} bytes for {} {} elements of shape {}, expected {}", where,
                  name, en - b, *numel, dname, shape_str(shape), expect);
    f->tensors_.push_back({name, *dtype, std::move(shape), b, en});
  }
  std::sort(f->tensors_.begin(), f->tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  for (const auto& t : f->tensors_) {
    AVDIT_REQUIRE(t.begin == cursor, "{}: tensor '{}': data starts at {} but the previous tensor ends at {} "
                  "(overlapping or non-contiguous offsets)", where, t.name, t.begin, cursor);
    cursor = t.end;
  }
  AVDIT_REQUIRE(cursor == data_size, "{}: the tensors cover {} bytes but the data section has {} "
                "(trailing bytes or a truncated file)", where, cursor, data_size);
  for (size_t i = 0; i < f->tensors_.size(); ++i) f->index_[f->tensors_[i].name] = i;
  return f;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::from_views(
    std::shared_ptr<const void> bytes, uint64_t size, const fs::path& path,
    std::vector<TensorInfo> tensors, std::map<std::string, std::string> metadata) {
  auto f = std::make_shared<SafetensorsFile>();
  f->path_ = path;
  f->mapping_ = std::move(bytes);
  f->data_ = static_cast<const char*>(f->mapping_.get());
  f->metadata_ = std::move(metadata);
  const std::string where = path.string();
  for (const TensorInfo& t : tensors) {
    const std::optional<int64_t> numel = checked::numel(t.shape);
    AVDIT_REQUIRE(numel.has_value(), "{}: tensor '{}': shape {} too large", where, t.name,
                  shape_str(t.shape));
    const int64_t expect = *checked::nbytes(*numel, dtype_bits(t.dtype));
    AVDIT_REQUIRE(
        t.begin <= t.end && t.end <= size && t.end - t.begin == static_cast<uint64_t>(expect),
        "{}: tensor '{}': bytes [{}, {}) for {} elements of {} in a {}-byte file", where, t.name,
        t.begin, t.end, *numel, dtype_name(t.dtype), size);
  }
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  f->tensors_ = std::move(tensors);
  for (size_t i = 0; i < f->tensors_.size(); ++i)
    AVDIT_REQUIRE(f->index_.emplace(f->tensors_[i].name, i).second, "{}: two tensors named '{}'",
                  where, f->tensors_[i].name);
  return f;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Tensor SafetensorsFile::view(const TensorInfo& info, uint64_t byte_begin, Shape shape) const {
  const char* p = data_ + info.begin + byte_begin;
  const size_t align = static_cast<size_t>(std::max(1, dtype_bits(info.dtype) / 8));
  if (reinterpret_cast<uintptr_t>(p) % align != 0) {
    // The format does not promise alignment; copy rather than read misaligned words.
    return Tensor::from_data(std::move(shape), info.dtype, p);
  }
  return Tensor::wrap(mapping_, p, std::move(shape), info.dtype);
}

Tensor SafetensorsFile::get(std::string_view name) const {
  const TensorInfo* info = find(name);
  AVDIT_REQUIRE(info, "{}: no tensor named '{}'", path_.string(), name);
  return view(*info, 0, info->shape);
}

Tensor SafetensorsFile::get_rows(std::string_view name, int64_t begin, int64_t end) const {
  const TensorInfo* info = find(name);
  AVDIT_REQUIRE(info, "{}: no tensor named '{}'", path_.string(), name);
  AVDIT_REQUIRE(!info->shape.empty() && 0 <= begin && begin <= end && end <= info->shape[0],
                "{}: tensor '{}' of shape {}: rows [{}, {}) out of range", path_.string(), name,
                shape_str(info->shape), begin, end);
  Shape shape = info->shape;
  const int64_t row = shape_numel(Shape(shape.begin() + 1, shape.end()));
  shape[0] = end - begin;
  AVDIT_REQUIRE((row * begin * dtype_bits(info->dtype)) % 8 == 0,
                "{}: tensor '{}': rows [{}, {}) do not start on a byte", path_.string(), name, begin, end);
  return view(*info, static_cast<uint64_t>(dtype_nbytes(info->dtype, row * begin)), std::move(shape));
}

json read_json(const fs::path& path) {
  return parse_json(read_regular_file(path, kMaxJsonFileBytes, "a JSON file"), path.string());
}

namespace {

// A shard named by an index: a relative path inside the model folder, also after resolving
// symlinks, so that an index cannot make avdit read (and quote) files elsewhere.
fs::path shard_path(const fs::path& index, const std::string& shard, const std::string& tensor) {
  const std::string where = index.string();
  AVDIT_REQUIRE(!shard.empty() && shard.find('\0') == std::string::npos,
                "{}: weight_map['{}'] is not a file name", where, tensor);
  const fs::path rel(shard);
  AVDIT_REQUIRE(rel.is_relative() && !rel.has_root_name() && !rel.has_root_directory(),
                "{}: shard '{}' (tensor '{}') is an absolute path; shards must be files inside the "
                "model folder",
                where, shard, tensor);
  for (const auto& part : rel)
    AVDIT_REQUIRE(part != "..", "{}: shard '{}' (tensor '{}') leaves the model folder ('..')",
                  where, shard, tensor);
  const fs::path folder = index.parent_path().empty() ? fs::path(".") : index.parent_path();
  const fs::path p = folder / rel;
  std::error_code ec;
  AVDIT_REQUIRE(fs::exists(p, ec), "{}: shard '{}' (holding tensor '{}') is missing on disk", where,
                shard, tensor);
  const fs::path real = fs::canonical(p, ec);
  AVDIT_REQUIRE(!ec, "{}: shard '{}' (tensor '{}'): cannot resolve: {}", where, shard, tensor,
                ec.message());
  const fs::path root = fs::canonical(folder, ec);
  AVDIT_REQUIRE(!ec, "{}: cannot resolve the model folder: {}", where, ec.message());
  const auto [r, t] = std::mismatch(root.begin(), root.end(), real.begin(), real.end());
  AVDIT_REQUIRE(r == root.end(),
                "{}: shard '{}' (tensor '{}') resolves to {}, outside the model folder {} (a "
                "symlink leading out?)",
                where, shard, tensor, real.string(), root.string());
  return p;
}

}  // namespace

bool Checkpoint::folder_has_weights(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.ends_with(".safetensors") || n.ends_with(".safetensors.index.json") ||
        is_torch_checkpoint_name(e.path()))
      return true;
  }
  return false;
}

Checkpoint Checkpoint::open(const fs::path& path, const Wanted& wanted) {
  Checkpoint c;
  c.source_ = path;
  std::error_code ec;
  AVDIT_REQUIRE(fs::exists(path, ec), "{}: no such file or folder", path.string());
  fs::path index;
  std::vector<fs::path> shards;
  if (fs::is_directory(path, ec)) {
    c.dir_ = path;
    if (fs::exists(path / "config.json", ec)) {
      c.config_ = read_json(path / "config.json");
      AVDIT_REQUIRE(c.config_->is_object(), "{}: expected a JSON object, found {}",
                    (path / "config.json").string(), c.config_->type_name());
    }
    std::vector<fs::path> indexes, files, torch_files;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const std::string n = e.path().filename().string();
      if (n.ends_with(".safetensors.index.json")) indexes.push_back(e.path());
      if (n.ends_with(".safetensors")) files.push_back(e.path());
      if (is_torch_checkpoint_name(e.path())) torch_files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    std::sort(torch_files.begin(), torch_files.end());
    AVDIT_REQUIRE(!ec, "{}: cannot list the folder: {}", path.string(), ec.message());
    if (fs::exists(path / "model.safetensors", ec)) {
      shards = {path / "model.safetensors"};
    } else if (indexes.size() == 1) {
      index = indexes[0];
    } else if (indexes.size() > 1) {
      throw BadInput(fmt::format("{}: {} shard indexes; point at the one to use", path.string(), indexes.size()));
    } else if (!files.empty()) {
      // Fall back to every safetensors file in the folder (e.g. diffusion_pytorch_model.safetensors).
      shards = files;
    } else if (torch_files.size() == 1) {
      shards = torch_files;  // a release that ships a PyTorch checkpoint (Wan2.2_VAE.pth)
    } else if (torch_files.size() > 1) {
      throw BadInput(fmt::format("{}: {} PyTorch checkpoints ({}, ...); point at the one to use",
                                 path.string(), torch_files.size(),
                                 torch_files[0].filename().string()));
    }
    AVDIT_REQUIRE(!index.empty() || !shards.empty(),
                  "{}: no .safetensors files, index or PyTorch checkpoint (.pth, .pt, .ckpt) in "
                  "this folder",
                  path.string());
  } else if (path.filename().string().ends_with(".json")) {
    index = path;
    c.dir_ = path.parent_path();
  } else {
    shards = {path};
    c.dir_ = path.parent_path();
  }
  if (!index.empty()) {
    const json j = read_json(index);
    AVDIT_REQUIRE(j.contains("weight_map") && j["weight_map"].is_object(), "{}: no weight_map object",
                  index.string());
    std::map<std::string, size_t> shard_ids;
    std::vector<std::pair<std::string, std::string>> entries;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      AVDIT_REQUIRE(it.value().is_string(), "{}: weight_map['{}'] is not a file name", index.string(), it.key());
      if (!wanted || wanted(it.key()))
        entries.emplace_back(it.key(), it.value().get<std::string>());
    }
    for (const auto& [name, shard] : entries) {
      if (shard_ids.count(shard)) continue;
      const fs::path p = shard_path(index, shard, name);
      shard_ids[shard] = c.files_.size();
      c.files_.push_back(SafetensorsFile::open(p));
    }
    for (const auto& [name, shard] : entries) {
      const size_t fi = shard_ids[shard];
      AVDIT_REQUIRE(c.files_[fi]->find(name), "{}: the index puts tensor '{}' in '{}', which lacks it",
                    index.string(), name, shard);
      c.where_[name] = fi;
    }
  } else {
    for (const auto& p : shards) {
      const size_t fi = c.files_.size();
      c.files_.push_back(is_torch_checkpoint_name(p) ? open_torch_checkpoint(p)
                                                     : SafetensorsFile::open(p));
      for (const auto& t : c.files_.back()->tensors()) {
        if (wanted && !wanted(t.name)) continue;
        AVDIT_REQUIRE(!c.where_.count(t.name), "{}: tensor '{}' appears in two files", path.string(), t.name);
        c.where_[t.name] = fi;
      }
    }
  }
  return c;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : where_) out.push_back(n);
  return out;
}

bool Checkpoint::contains(std::string_view name) const { return where_.find(name) != where_.end(); }

const SafetensorsFile& Checkpoint::file_of(std::string_view name) const {
  const auto it = where_.find(name);
  AVDIT_REQUIRE(it != where_.end(), "{}: checkpoint lacks tensor '{}'", source_.string(), name);
  return *files_[it->second];
}

const TensorInfo& Checkpoint::info(std::string_view name) const { return *file_of(name).find(name); }
Tensor Checkpoint::get(std::string_view name) const { return file_of(name).get(name); }
Tensor Checkpoint::get_rows(std::string_view name, int64_t begin, int64_t end) const {
  return file_of(name).get_rows(name, begin, end);
}

Tensor Checkpoint::require(std::string_view name, const Shape& expected, std::optional<DType> dtype) const {
  const SafetensorsFile& f = file_of(name);
  const TensorInfo& i = *f.find(name);
  AVDIT_REQUIRE(i.shape == expected, "{}: tensor '{}' has shape {}, the model expects {} (config and checkpoint disagree?)",
                f.path().string(), name, shape_str(i.shape), shape_str(expected));
  AVDIT_REQUIRE(!dtype || i.dtype == *dtype, "{}: tensor '{}' has dtype {}, the model expects {}", f.path().string(),
                name, dtype_name(i.dtype), dtype_name(*dtype));
  return f.get(name);
}

TensorMap read_all(const fs::path& path) {
  const auto f = SafetensorsFile::open(path);
  TensorMap out;
  for (const auto& t : f->tensors()) out[t.name] = f->get(t.name);
  return out;
}

namespace {

std::string header_for(const std::vector<TensorDecl>& decls, const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const auto& d : decls) {
    AVDIT_CHECK(d.dtype != DType::E2M1, "tensor '{}': E2M1 is stored as U8 pairs in files", d.name);
    const auto bytes = static_cast<uint64_t>(dtype_nbytes(d.dtype, shape_numel(d.shape)));
    h[d.name] = {{"dtype", dtype_name(d.dtype)}, {"shape", d.shape}, {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  std::string s = h.dump();
  s.resize((s.size() + 7) / 8 * 8, ' ');  // pad so the data section starts 8-byte aligned
  return s;
}

// Streams tensors into `out`; `make(i)` returns tensor i.
void write_into(OutputFile& out, const std::vector<TensorDecl>& decls,
                const std::function<Tensor(size_t)>& make,
                const std::map<std::string, std::string>& metadata) {
  const std::string header = header_for(decls, metadata);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  out.write(len, 8);
  out.write(header);
  for (size_t i = 0; i < decls.size(); ++i) {
    const Tensor t = make(i);
    AVDIT_CHECK(
        t.device() == Device::CPU && t.dtype() == decls[i].dtype && t.shape() == decls[i].shape,
        "write: tensor '{}' is {} {}, declared {} {}", decls[i].name, dtype_name(t.dtype()),
        t.shape_str(), dtype_name(decls[i].dtype), shape_str(decls[i].shape));
    if (t.nbytes() > 0) out.write(t.raw(), static_cast<size_t>(t.nbytes()));
  }
}

// A whole file: a temporary file beside `path`, renamed into place when complete.
void write_file(const fs::path& path, const std::vector<TensorDecl>& decls,
                const std::function<Tensor(size_t)>& make,
                const std::map<std::string, std::string>& metadata) {
  OutputFile out(path);
  write_into(out, decls, make, metadata);
  out.publish();
}

std::vector<TensorDecl> decls_of(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<TensorDecl> decls;
  for (const auto& [name, t] : tensors) decls.push_back({name, t.shape(), t.dtype()});
  return decls;
}

}  // namespace

void write_safetensors(const fs::path& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file(
      path, decls_of(tensors), [&](size_t i) { return tensors[i].second; }, metadata);
}

void write_safetensors(OutputFile& out, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_into(
      out, decls_of(tensors), [&](size_t i) { return tensors[i].second; }, metadata);
}

void write_safetensors(const fs::path& path, const TensorMap& tensors, const std::map<std::string, std::string>& metadata) {
  write_safetensors(path, std::vector<std::pair<std::string, Tensor>>(tensors.begin(), tensors.end()), metadata);
}

void write_checkpoint_sharded(const fs::path& dir, const std::vector<TensorDecl>& decls,
                              const std::function<Tensor(const TensorDecl&)>& make, int64_t max_shard_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  AVDIT_REQUIRE(!ec, "{}: cannot create the folder: {}", dir.string(), ec.message());
  std::vector<std::vector<size_t>> shards(1);
  int64_t used = 0, total = 0;
  for (size_t i = 0; i < decls.size(); ++i) {
    const int64_t b = dtype_nbytes(decls[i].dtype, shape_numel(decls[i].shape));
    if (used > 0 && used + b > max_shard_bytes) {
      shards.emplace_back();
      used = 0;
    }
    shards.back().push_back(i);
    used += b;
    total += b;
  }
  auto write_shard = [&](const fs::path& p, const std::vector<size_t>& ids) {
    std::vector<TensorDecl> d;
    for (size_t i : ids) d.push_back(decls[i]);
    write_file(p, d, [&](size_t k) { return make(d[k]); }, {{"format", "pt"}});
  };
  if (shards.size() == 1) {
    write_shard(dir / "model.safetensors", shards[0]);
    return;
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", json::object()}};
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    write_shard(dir / name, shards[s]);
    for (size_t i : shards[s]) index["weight_map"][decls[i].name] = name;
  }
  // The index goes last and atomically: a folder with an index always has all its shards.
  write_file_atomic(dir / "model.safetensors.index.json", index.dump(2) + "\n");
}

}  // namespace avdit
