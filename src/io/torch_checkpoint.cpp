// torch.save's zip format (see torch_checkpoint.h). The archive holds PREFIX/data.pkl (pickle
// protocol 2: the object, each tensor a call of torch._utils._rebuild_tensor_v2 on a storage
// named by a persistent id ('storage', torch.<T>Storage, key, location, numel)), PREFIX/data/<key>
// (each storage's raw little-endian bytes, stored uncompressed and 64-byte aligned),
// PREFIX/byteorder, PREFIX/version and a few more. The pickle runs on a small stack machine whose
// values live in one arena (indices, not pointers: a self-referencing list cannot leak or recurse);
// only the callables a state dict needs are known, and calling them builds a value, nothing more.
#include "io/torch_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/checked.h"
#include "core/error.h"
#include "io/regular_file.h"
#include "io/safetensors.h"

namespace avdit {
namespace {

namespace fs = std::filesystem;

// Bounds on what a hostile file can make us hold: the pickle's bytes, the values it builds and
// the zip's entries. A state dict of 10,000 tensors builds ~150,000 values from ~2 MB of pickle.
constexpr uint64_t kMaxPickleBytes = uint64_t{64} << 20;
constexpr size_t kMaxValues = size_t{4} << 20;
constexpr uint64_t kMaxZipEntries = uint64_t{1} << 20;
constexpr size_t kMaxNameBytes = 4096;

// ---- the zip archive --------------------------------------------------------------------------

struct ZipEntry {
  uint16_t method = 0, flags = 0;
  uint64_t compressed = 0, size = 0, local = 0;
};

class Zip {
 public:
  Zip(const unsigned char* bytes, uint64_t size, std::string where)
      : p_(bytes), n_(size), where_(std::move(where)) {
    read_directory();
  }

  const std::map<std::string, ZipEntry, std::less<>>& entries() const { return entries_; }

  // The bytes of a stored (uncompressed) record: [offset, offset + size) of the file.
  std::pair<uint64_t, uint64_t> data(const std::string& name) const {
    const auto it = entries_.find(name);
    AVDIT_REQUIRE(it != entries_.end(), "{}: the archive has no record '{}'", where_, name);
    const ZipEntry& e = it->second;
    AVDIT_REQUIRE(!(e.flags & 1), "{}: record '{}' is encrypted", where_, name);
    AVDIT_REQUIRE(e.method == 0 && e.compressed == e.size,
                  "{}: record '{}' is compressed (method {}); torch.save stores records "
                  "uncompressed, and avdit maps them as they are",
                  where_, name, e.method);
    AVDIT_REQUIRE(e.local <= n_ && n_ - e.local >= 30 && u32(e.local) == 0x04034b50,
                  "{}: record '{}': no local header at byte {} (truncated or corrupt archive)",
                  where_, name, e.local);
    const uint64_t begin = e.local + 30 + u16(e.local + 26) + u16(e.local + 28);
    AVDIT_REQUIRE(begin <= n_ && n_ - begin >= e.size,
                  "{}: record '{}' ({} bytes at byte {}) runs past the end of the {}-byte file "
                  "(truncated download?)",
                  where_, name, e.size, begin, n_);
    return {begin, e.size};
  }

 private:
  uint16_t u16(uint64_t at) const {
    need(at, 2);
    return static_cast<uint16_t>(p_[at] | p_[at + 1] << 8);
  }
  uint32_t u32(uint64_t at) const {
    need(at, 4);
    return static_cast<uint32_t>(u16(at)) | static_cast<uint32_t>(u16(at + 2)) << 16;
  }
  uint64_t u64(uint64_t at) const {
    need(at, 8);
    return static_cast<uint64_t>(u32(at)) | static_cast<uint64_t>(u32(at + 4)) << 32;
  }
  void need(uint64_t at, uint64_t len) const {
    AVDIT_REQUIRE(at <= n_ && n_ - at >= len,
                  "{}: truncated: a zip structure at byte {} needs {} bytes, the file has {}",
                  where_, at, len, n_);
  }

  void read_directory() {
    // The end-of-central-directory record: within the last 64 KiB (its comment) + 22 bytes.
    uint64_t eocd = n_;
    if (n_ >= 22) {
      const uint64_t lowest = n_ - 22 > 65535 ? n_ - 22 - 65535 : 0;
      for (uint64_t at = n_ - 22 + 1; at-- > lowest;)
        if (u32(at) == 0x06054b50) {
          eocd = at;
          break;
        }
    }
    if (eocd == n_) {
      const bool legacy = n_ > 0 && p_[0] == 0x80;  // a pickle: torch's format before 1.6
      throw BadInput(fmt::format(
          "{}: {}", where_,
          legacy ? "a PyTorch checkpoint in the legacy format (torch < 1.6, not a zip archive); "
                   "re-save it with a current torch.save"
                 : "not a zip archive (no end-of-central-directory record): a truncated file, or "
                   "not a PyTorch checkpoint"));
    }
    uint64_t count = u16(eocd + 10), cd_size = u32(eocd + 12), cd_offset = u32(eocd + 16);
    if (count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
      // ZIP64: the locator sits just before the record and points at the zip64 record.
      AVDIT_REQUIRE(eocd >= 20 && u32(eocd - 20) == 0x07064b50,
                    "{}: a ZIP64 archive without its ZIP64 locator (corrupt archive)", where_);
      const uint64_t z = u64(eocd - 20 + 8);
      AVDIT_REQUIRE(z < eocd && u32(z) == 0x06064b50,
                    "{}: the ZIP64 locator points at byte {}, which holds no ZIP64 record", where_,
                    z);
      count = u64(z + 32);
      cd_size = u64(z + 40);
      cd_offset = u64(z + 48);
    }
    AVDIT_REQUIRE(count <= kMaxZipEntries, "{}: {} zip entries (more than {})", where_, count,
                  kMaxZipEntries);
    AVDIT_REQUIRE(cd_offset <= n_ && n_ - cd_offset >= cd_size,
                  "{}: the central directory ({} bytes at byte {}) lies outside the {}-byte file "
                  "(truncated download?)",
                  where_, cd_size, cd_offset, n_);
    const uint64_t end = cd_offset + cd_size;
    uint64_t at = cd_offset;
    for (uint64_t i = 0; i < count; ++i) {
      AVDIT_REQUIRE(end - at >= 46 && u32(at) == 0x02014b50,
                    "{}: central directory entry {} of {} is missing or corrupt (byte {})", where_,
                    i, count, at);
      ZipEntry e;
      e.flags = u16(at + 8);
      e.method = u16(at + 10);
      e.compressed = u32(at + 20);
      e.size = u32(at + 24);
      const uint64_t name_len = u16(at + 28), extra_len = u16(at + 30), comment_len = u16(at + 32);
      e.local = u32(at + 42);
      const uint64_t total = 46 + name_len + extra_len + comment_len;
      AVDIT_REQUIRE(end - at >= total, "{}: central directory entry {} runs past the directory",
                    where_, i);
      std::string name(reinterpret_cast<const char*>(p_ + at + 46), name_len);
      // ZIP64 extra field: the 8-byte values of the fields saturated above, in this order.
      for (uint64_t x = at + 46 + name_len, xe = x + extra_len; xe - x >= 4;) {
        const uint16_t id = u16(x), len = u16(x + 2);
        AVDIT_REQUIRE(xe - x - 4 >= len, "{}: entry '{}': an extra field runs past its entry",
                      where_, name);
        if (id == 0x0001) {
          uint64_t f = x + 4;
          auto wide = [&](uint64_t& v) {
            if (v != 0xFFFFFFFF) return;
            AVDIT_REQUIRE(x + 4 + len - f >= 8, "{}: entry '{}': a short ZIP64 extra field", where_,
                          name);
            v = u64(f);
            f += 8;
          };
          wide(e.size);
          wide(e.compressed);
          wide(e.local);
        }
        x += 4 + len;
      }
      AVDIT_REQUIRE(entries_.emplace(std::move(name), e).second,
                    "{}: two zip entries have the same name", where_);
      at += total;
    }
  }

  const unsigned char* p_;
  uint64_t n_;
  std::string where_;
  std::map<std::string, ZipEntry, std::less<>> entries_;
};

// ---- the pickle machine -----------------------------------------------------------------------

enum class Kind : uint8_t {
  None,
  Bool,
  Int,
  Float,
  Str,
  Bytes,
  Tuple,
  List,
  Dict,
  Global,
  Storage,
  Tensor,
  Object
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "a bool";
    case Kind::Int: return "an int";
    case Kind::Float: return "a float";
    case Kind::Str: return "a string";
    case Kind::Bytes: return "bytes";
    case Kind::Tuple: return "a tuple";
    case Kind::List: return "a list";
    case Kind::Dict: return "a dict";
    case Kind::Global: return "a class or function";
    case Kind::Storage: return "a storage";
    case Kind::Tensor: return "a tensor";
    case Kind::Object: return "an object";
  }
  return "?";
}

using Ref = uint32_t;

struct Value {
  Kind kind = Kind::None;
  int64_t i = 0;           // Bool, Int; Storage and Tensor: their index
  double f = 0;            // Float
  std::string s;           // Str, Bytes; Global and Object: "module.name"
  std::vector<Ref> items;  // Tuple, List; Dict: key, value, key, value, ...
};

struct StorageRef {
  std::string key;
  DType dtype;
  int64_t numel;
  uint64_t begin, bytes;  // the record's data in the file
};

struct TensorRef {
  int64_t storage, offset;
  Shape shape;
  std::vector<int64_t> stride;
};

// torch.<Name>Storage -> dtype.
std::optional<DType> storage_dtype(std::string_view name) {
  static const std::map<std::string_view, DType> m = {{"FloatStorage", DType::F32},
                                                      {"DoubleStorage", DType::F64},
                                                      {"HalfStorage", DType::F16},
                                                      {"BFloat16Storage", DType::BF16},
                                                      {"LongStorage", DType::I64},
                                                      {"IntStorage", DType::I32},
                                                      {"ShortStorage", DType::I16},
                                                      {"CharStorage", DType::I8},
                                                      {"ByteStorage", DType::U8},
                                                      {"BoolStorage", DType::Bool},
                                                      {"Float8_e4m3fnStorage", DType::F8_E4M3}};
  const auto it = m.find(name);
  return it == m.end() ? std::nullopt : std::optional<DType>(it->second);
}

bool is_torch_dtype_name(std::string_view n) {
  static const std::array<std::string_view, 22> names = {
      "float32",       "float",       "float64", "double", "float16",   "half",
      "bfloat16",      "int64",       "long",    "int32",  "int",       "int16",
      "short",         "int8",        "uint8",   "bool",   "complex64", "complex128",
      "float8_e4m3fn", "float8_e5m2", "cfloat",  "cdouble"};
  return std::find(names.begin(), names.end(), n) != names.end();
}

// The globals a weights-only checkpoint may name (torch.load(weights_only=True)'s allowlist, cut
// to what state dicts use): callables that build values, storage types and dtypes.
bool allowed_global(std::string_view module, std::string_view name) {
  if (module == "collections" && name == "OrderedDict") return true;
  if (module == "torch._utils" && (name == "_rebuild_tensor_v2" || name == "_rebuild_parameter" ||
                                   name == "_rebuild_parameter_with_state"))
    return true;
  if (module == "torch" &&
      (name == "Size" || name == "device" || storage_dtype(name) || is_torch_dtype_name(name)))
    return true;
  if (module == "_codecs" && name == "encode") return true;
  if (module == "builtins" && (name == "set" || name == "frozenset")) return true;
  return false;
}

class Unpickler {
 public:
  Unpickler(const unsigned char* p, uint64_t n, const Zip& zip, std::string prefix,
            std::string where)
      : p_(p), n_(n), zip_(zip), prefix_(std::move(prefix)), where_(std::move(where)) {}

  Ref run() {
    for (;;) {
      const uint64_t at = pos_;
      const unsigned char op = byte();
      if (op == '.') {
        AVDIT_REQUIRE(marks_.empty() && stack_.size() == 1,
                      "{}: data.pkl ends (STOP at byte {}) with {} values and {} marks on the "
                      "stack, expected one value",
                      where_, at, stack_.size(), marks_.size());
        return stack_.back();
      }
      step(op, at);
    }
  }

  const Value& at(Ref r) const { return heap_[r]; }
  const std::vector<StorageRef>& storages() const { return storages_; }
  const std::vector<TensorRef>& tensors() const { return tensors_; }

 private:
  [[noreturn]] void bad(uint64_t at, const std::string& what) const {
    throw BadInput(fmt::format("{}: data.pkl byte {}: {}", where_, at, what));
  }

  unsigned char byte() {
    if (pos_ >= n_) bad(pos_, "the pickle ends without its STOP opcode (truncated)");
    return p_[pos_++];
  }
  uint64_t uint_le(int bytes) {
    if (n_ - pos_ < static_cast<uint64_t>(bytes))
      bad(pos_, fmt::format("truncated: {} more bytes needed", bytes));
    uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) v |= static_cast<uint64_t>(p_[pos_ + k]) << (8 * k);
    pos_ += bytes;
    return v;
  }
  std::string take(uint64_t len) {
    if (n_ - pos_ < len) bad(pos_, fmt::format("truncated: a {}-byte string", len));
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  std::string line() {
    const uint64_t start = pos_;
    while (pos_ < n_ && p_[pos_] != '\n') {
      if (pos_ - start >= kMaxNameBytes) bad(start, "a GLOBAL name longer than 4096 bytes");
      ++pos_;
    }
    if (pos_ >= n_) bad(start, "truncated: a GLOBAL name without its newline");
    std::string s(reinterpret_cast<const char*>(p_ + start), pos_ - start);
    ++pos_;
    return s;
  }

  Ref make(Value v) {
    if (heap_.size() >= kMaxValues)
      bad(pos_, fmt::format("more than {} values (not a state dict)", kMaxValues));
    heap_.push_back(std::move(v));
    return static_cast<Ref>(heap_.size() - 1);
  }
  Ref make(Kind k, int64_t i = 0) {
    Value v;
    v.kind = k;
    v.i = i;
    return make(std::move(v));
  }
  void push(Ref r) {
    if (stack_.size() >= kMaxValues)
      bad(pos_, fmt::format("more than {} values on the stack", kMaxValues));
    stack_.push_back(r);
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  Ref pop(uint64_t at) {
    if (stack_.size() <= floor()) bad(at, "an opcode pops from an empty stack");
    const Ref r = stack_.back();
    stack_.pop_back();
    return r;
  }
  Ref top(uint64_t at) const {
    if (stack_.size() <= floor()) bad(at, "an opcode reads an empty stack");
    return stack_.back();
  }
  // The values above the last mark, which is removed.
  std::vector<Ref> pop_mark(uint64_t at) {
    if (marks_.empty()) bad(at, "an opcode needs a MARK and there is none");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Ref> v(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return v;
  }
  Ref expect(Ref r, Kind k, uint64_t at, const char* what) const {
    if (heap_[r].kind != k)
      bad(at, fmt::format("{} is {}, expected {}", what, kind_name(heap_[r].kind), kind_name(k)));
    return r;
  }
  Ref tuple(std::vector<Ref> items) {
    Value v;
    v.kind = Kind::Tuple;
    v.items = std::move(items);
    return make(std::move(v));
  }
  void memo_put(uint64_t index, uint64_t at) {
    if (memo_.size() >= kMaxValues) bad(at, "too many memo entries");
    memo_[index] = top(at);
  }
  Ref memo_get(uint64_t index, uint64_t at) const {
    const auto it = memo_.find(index);
    if (it == memo_.end()) bad(at, fmt::format("memo entry {} was never stored", index));
    return it->second;
  }
  // Appends to the list (or set) under the values: APPEND, APPENDS, ADDITEMS.
  void extend(Ref list, const std::vector<Ref>& items, uint64_t at) {
    if (heap_[list].kind != Kind::List)
      bad(at, fmt::format("APPEND to {}, not a list", kind_name(heap_[list].kind)));
    for (Ref r : items) heap_[list].items.push_back(r);
  }
  void set_items(Ref dict, const std::vector<Ref>& kv, uint64_t at) {
    if (heap_[dict].kind != Kind::Dict)
      bad(at, fmt::format("SETITEM on {}, not a dict", kind_name(heap_[dict].kind)));
    if (kv.size() % 2) bad(at, "SETITEMS with an odd number of values");
    for (Ref r : kv) heap_[dict].items.push_back(r);
  }

  int64_t int_of(Ref r, uint64_t at, const char* what) const {
    expect(r, Kind::Int, at, what);
    return heap_[r].i;
  }
  std::vector<int64_t> ints_of(Ref r, uint64_t at, const char* what) const {
    expect(r, Kind::Tuple, at, what);
    std::vector<int64_t> v;
    for (Ref e : heap_[r].items) v.push_back(int_of(e, at, what));
    return v;
  }

  Ref global(const std::string& module, const std::string& name, uint64_t at) {
    if (!allowed_global(module, name))
      bad(at, fmt::format("the pickle imports {}.{}, which a weights-only checkpoint does not "
                          "hold (avdit reads tensors, dicts, lists, tuples, numbers and strings, "
                          "and runs no code)",
                          module, name));
    Value v;
    v.kind = Kind::Global;
    v.s = module + "." + name;
    return make(std::move(v));
  }

  // BINPERSID: ('storage', torch.<T>Storage, key, location, numel).
  Ref persistent(Ref pid, uint64_t at) {
    const Value& t = heap_[expect(pid, Kind::Tuple, at, "a persistent id")];
    if (t.items.size() != 5 || heap_[t.items[0]].kind != Kind::Str ||
        heap_[t.items[0]].s != "storage")
      bad(at, "a persistent id that is not ('storage', type, key, location, numel)");
    const Value& type = heap_[expect(t.items[1], Kind::Global, at, "a storage type")];
    const std::string& key = heap_[expect(t.items[2], Kind::Str, at, "a storage key")].s;
    expect(t.items[3], Kind::Str, at, "a storage location");
    const int64_t numel = int_of(t.items[4], at, "a storage's element count");
    const std::optional<DType> dtype =
        type.s.starts_with("torch.") ? storage_dtype(type.s.substr(6)) : std::nullopt;
    if (!dtype) bad(at, fmt::format("storage type {} is not one avdit reads", type.s));
    if (numel < 0 || numel > checked::kMaxElements)
      bad(at, fmt::format("storage '{}' has {} elements", key, numel));
    if (auto it = storage_index_.find(key); it != storage_index_.end()) {
      const StorageRef& s = storages_[static_cast<size_t>(it->second)];
      if (s.dtype != *dtype || s.numel != numel)
        bad(at, fmt::format("storage '{}' is named twice with different types or sizes", key));
      return make(Kind::Storage, it->second);
    }
    const std::string record = prefix_ + "data/" + key;
    if (!zip_.entries().count(record))
      bad(at, fmt::format("storage '{}' has no record '{}' in the archive", key, record));
    const auto [begin, bytes] = zip_.data(record);
    const int64_t need = *checked::nbytes(numel, dtype_bits(*dtype));
    if (bytes < static_cast<uint64_t>(need))
      bad(at, fmt::format("storage '{}': {} {} elements need {} bytes, its record has {}", key,
                          numel, dtype_name(*dtype), need, bytes));
    const auto index = static_cast<int64_t>(storages_.size());
    storages_.push_back({key, *dtype, numel, begin, bytes});
    storage_index_[key] = index;
    return make(Kind::Storage, index);
  }

  // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]).
  Ref rebuild_tensor(const std::vector<Ref>& a, uint64_t at) {
    if (a.size() != 6 && a.size() != 7)
      bad(at, "_rebuild_tensor_v2 with neither 6 nor 7 arguments");
    const int64_t storage = heap_[expect(a[0], Kind::Storage, at, "a tensor's storage")].i;
    const int64_t offset = int_of(a[1], at, "a tensor's storage offset");
    TensorRef t{storage, offset, ints_of(a[2], at, "a tensor's size"),
                ints_of(a[3], at, "a tensor's stride")};
    if (t.stride.size() != t.shape.size())
      bad(at, fmt::format("a tensor of {} dimensions with {} strides", t.shape.size(),
                          t.stride.size()));
    const std::optional<int64_t> numel = checked::numel(t.shape);
    if (!numel) bad(at, fmt::format("a tensor of shape {} (too large)", shape_str(t.shape)));
    const StorageRef& s = storages_[static_cast<size_t>(storage)];
    if (offset < 0 || offset > s.numel)
      bad(at, fmt::format("a tensor at offset {} of storage '{}', which has {} elements", offset,
                          s.key, s.numel));
    if (*numel > 0) {
      // The furthest element a strided view reads; offset + that must lie in the storage.
      int64_t last = offset;
      for (size_t d = 0; d < t.shape.size(); ++d) {
        const auto step = checked::mul(t.shape[d] - 1, t.stride[d]);
        const auto sum = step ? checked::add(last, *step) : std::nullopt;
        if (t.stride[d] < 0 || !sum) bad(at, "a tensor with a negative or huge stride");
        last = *sum;
      }
      if (last >= s.numel)
        bad(at, fmt::format("a tensor of shape {} at offset {} reads element {} of storage '{}', "
                            "which has {}",
                            shape_str(t.shape), offset, last, s.key, s.numel));
    }
    return make(Kind::Tensor, static_cast<int64_t>(push_tensor(std::move(t))));
  }
  size_t push_tensor(TensorRef t) {
    tensors_.push_back(std::move(t));
    return tensors_.size() - 1;
  }

  // REDUCE and NEWOBJ: the known callables build a value; nothing runs.
  Ref call(Ref fn, Ref args_ref, uint64_t at) {
    const std::string& f = heap_[expect(fn, Kind::Global, at, "a called object")].s;
    const std::vector<Ref> a = heap_[expect(args_ref, Kind::Tuple, at, "call arguments")].items;
    if (f == "collections.OrderedDict") {
      if (!a.empty()) bad(at, "OrderedDict called with arguments");
      return make(Kind::Dict);
    }
    if (f == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(a, at);
    if (f == "torch._utils._rebuild_parameter" ||
        f == "torch._utils._rebuild_parameter_with_state") {
      if (a.size() < 3) bad(at, fmt::format("{} with {} arguments", f, a.size()));
      return expect(a[0], Kind::Tensor, at, "a parameter's data");
    }
    if (f == "torch.Size") {
      if (a.size() != 1) bad(at, "torch.Size with other than one argument");
      return expect(a[0], Kind::Tuple, at, "torch.Size's argument");
    }
    if (f == "_codecs.encode") {  // bytes, as protocol 2 spells them: encode(latin-1 text)
      if (a.size() != 2) bad(at, "_codecs.encode with other than two arguments");
      const std::string& text = heap_[expect(a[0], Kind::Str, at, "encoded text")].s;
      Value v;
      v.kind = Kind::Bytes;
      for (size_t k = 0; k < text.size(); ++k) {  // UTF-8 code points below 256, one byte each
        const auto c = static_cast<unsigned char>(text[k]);
        if (c < 0x80) {
          v.s.push_back(static_cast<char>(c));
        } else if ((c == 0xC2 || c == 0xC3) && k + 1 < text.size()) {
          v.s.push_back(static_cast<char>(((c & 0x03) << 6) | (text[++k] & 0x3F)));
        } else {
          bad(at, "_codecs.encode of text that is not latin-1");
        }
      }
      return make(std::move(v));
    }
    if (f == "builtins.set" || f == "builtins.frozenset") {
      Value v;
      v.kind = Kind::List;
      if (!a.empty()) v.items = heap_[expect(a[0], Kind::List, at, "a set's items")].items;
      return make(std::move(v));
    }
    Value v;  // torch.device(...) and the like: an opaque value
    v.kind = Kind::Object;
    v.s = f;
    return make(std::move(v));
  }

  void step(unsigned char op, uint64_t at) {
    switch (op) {
      case 0x80: {  // PROTO
        const unsigned char v = byte();
        if (v > 5) bad(at, fmt::format("pickle protocol {} (at most 5 is read)", v));
        return;
      }
      case 0x95: uint_le(8); return;  // FRAME: a length hint
      case '(': marks_.push_back(stack_.size()); return;
      case '0': pop(at); return;
      case '1': pop_mark(at); return;
      case '2': push(top(at)); return;
      case 'N': push(make(Kind::None)); return;
      case 0x88: push(make(Kind::Bool, 1)); return;
      case 0x89: push(make(Kind::Bool, 0)); return;
      case 'J': push(make(Kind::Int, static_cast<int32_t>(uint_le(4)))); return;
      case 'K': push(make(Kind::Int, static_cast<int64_t>(uint_le(1)))); return;
      case 'M': push(make(Kind::Int, static_cast<int64_t>(uint_le(2)))); return;
      case 0x8a:    // LONG1
      case 0x8b: {  // LONG4: little-endian two's complement
        const uint64_t len = uint_le(op == 0x8a ? 1 : 4);
        if (len > 8) bad(at, fmt::format("a {}-byte integer (more than 64 bits)", len));
        uint64_t v = uint_le(static_cast<int>(len));
        if (len > 0 && len < 8 && (v >> (8 * len - 1) & 1)) v |= ~uint64_t{0} << (8 * len);
        push(make(Kind::Int, static_cast<int64_t>(v)));
        return;
      }
      case 'G': {  // BINFLOAT, big-endian
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = bits << 8 | byte();
        Value v;
        v.kind = Kind::Float;
        std::memcpy(&v.f, &bits, 8);
        push(make(std::move(v)));
        return;
      }
      case 'X':     // BINUNICODE
      case 0x8c:    // SHORT_BINUNICODE
      case 0x8d:    // BINUNICODE8
      case 'T':     // BINSTRING
      case 'U':     // SHORT_BINSTRING
      case 'B':     // BINBYTES
      case 'C':     // SHORT_BINBYTES
      case 0x8e: {  // BINBYTES8
        const int width = op == 0x8c || op == 'U' || op == 'C' ? 1
                          : op == 0x8d || op == 0x8e           ? 8
                                                               : 4;
        const uint64_t len = uint_le(width);
        Value v;
        v.kind = op == 'B' || op == 'C' || op == 0x8e ? Kind::Bytes : Kind::Str;
        v.s = take(len);
        push(make(std::move(v)));
        return;
      }
      case ')': push(tuple({})); return;
      case 't': push(tuple(pop_mark(at))); return;
      case 0x85: {
        const Ref a = pop(at);
        push(tuple({a}));
        return;
      }
      case 0x86: {
        const Ref b = pop(at), a = pop(at);
        push(tuple({a, b}));
        return;
      }
      case 0x87: {
        const Ref c = pop(at), b = pop(at), a = pop(at);
        push(tuple({a, b, c}));
        return;
      }
      case ']':
      case 0x8f: push(make(Kind::List)); return;  // EMPTY_LIST, EMPTY_SET
      case 'l': {
        Value v;
        v.kind = Kind::List;
        v.items = pop_mark(at);
        push(make(std::move(v)));
        return;
      }
      case 0x91: push(tuple(pop_mark(at))); return;  // FROZENSET
      case 'a': {
        const Ref v = pop(at);
        extend(top(at), {v}, at);
        return;
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        const std::vector<Ref> items = pop_mark(at);
        extend(top(at), items, at);
        return;
      }
      case '}': push(make(Kind::Dict)); return;
      case 'd': {
        const std::vector<Ref> kv = pop_mark(at);
        const Ref d = make(Kind::Dict);
        set_items(d, kv, at);
        push(d);
        return;
      }
      case 's': {
        const Ref v = pop(at), k = pop(at);
        set_items(top(at), {k, v}, at);
        return;
      }
      case 'u': {
        const std::vector<Ref> kv = pop_mark(at);
        set_items(top(at), kv, at);
        return;
      }
      case 'c': {
        const std::string module = line();
        const std::string name = line();
        push(global(module, name, at));
        return;
      }
      case 0x93: {  // STACK_GLOBAL
        const Ref name = pop(at), module = pop(at);
        push(global(heap_[expect(module, Kind::Str, at, "a module name")].s,
                    heap_[expect(name, Kind::Str, at, "a global's name")].s, at));
        return;
      }
      case 'R':
      case 0x81: {  // REDUCE, NEWOBJ
        const Ref args = pop(at), fn = pop(at);
        push(call(fn, args, at));
        return;
      }
      case 'b':  // BUILD: the state of a dict's attributes (_metadata); nothing to set
        pop(at);
        top(at);
        return;
      case 'Q': push(persistent(pop(at), at)); return;
      case 'q': memo_put(uint_le(1), at); return;
      case 'r': memo_put(uint_le(4), at); return;
      case 0x94: memo_put(memo_.size(), at); return;
      case 'h': push(memo_get(uint_le(1), at)); return;
      case 'j': push(memo_get(uint_le(4), at)); return;
      default:
        bad(at, fmt::format("pickle opcode 0x{:02x}{} is not one a weights-only checkpoint uses",
                            op, op >= 0x20 && op < 0x7f ? fmt::format(" ('{}')", char(op)) : ""));
    }
  }

  const unsigned char* p_;
  uint64_t n_, pos_ = 0;
  const Zip& zip_;
  std::string prefix_, where_;
  std::vector<Value> heap_;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
  std::vector<StorageRef> storages_;
  std::map<std::string, int64_t> storage_index_;
  std::vector<TensorRef> tensors_;
};

// The value under `key` of a dict, if any (string keys).
std::optional<Ref> lookup(const Unpickler& u, Ref dict, std::string_view key) {
  const Value& d = u.at(dict);
  for (size_t k = 0; k + 1 < d.items.size(); k += 2) {
    const Value& name = u.at(d.items[k]);
    if (name.kind == Kind::Str && name.s == key) return d.items[k + 1];
  }
  return std::nullopt;
}

// PREFIX/ of the archive's one PREFIX/data.pkl (torch writes "archive/" or, before 2.0, the file's
// stem).
std::string archive_prefix(const Zip& zip, const std::string& where) {
  std::string prefix;
  int found = 0;
  for (const auto& [name, e] : zip.entries()) {
    const size_t slash = name.find('/');
    if (slash != std::string::npos && name.substr(slash + 1) == "data.pkl") {
      prefix = name.substr(0, slash + 1);
      ++found;
    }
  }
  AVDIT_REQUIRE(found == 1,
                "{}: {} (a torch.save archive has one PREFIX/data.pkl; a TorchScript or other zip "
                "archive is not a checkpoint avdit reads)",
                where, found == 0 ? "no data.pkl record" : "several data.pkl records");
  return prefix;
}

}  // namespace

bool is_torch_checkpoint_name(const fs::path& path) {
  const std::string ext = path.extension().string();
  return ext == ".pth" || ext == ".pt" || ext == ".ckpt";
}

std::shared_ptr<SafetensorsFile> torch_checkpoint_from_memory(std::shared_ptr<const void> owner,
                                                              uint64_t size, const fs::path& path) {
  const std::string where = path.string();
  const auto* bytes = static_cast<const unsigned char*>(owner.get());
  const Zip zip(bytes, size, where);
  const std::string prefix = archive_prefix(zip, where);
  if (zip.entries().count(prefix + "byteorder")) {
    const auto [b, n] = zip.data(prefix + "byteorder");
    const std::string order(reinterpret_cast<const char*>(bytes + b), std::min<uint64_t>(n, 16));
    AVDIT_REQUIRE(order == "little", "{}: byte order '{}': only little-endian data is read", where,
                  order);
  }
  const auto [pkl, pkl_size] = zip.data(prefix + "data.pkl");
  AVDIT_REQUIRE(pkl_size <= kMaxPickleBytes,
                "{}: data.pkl has {} bytes, more than the {} a state dict needs", where, pkl_size,
                kMaxPickleBytes);
  Unpickler u(bytes + pkl, pkl_size, zip, prefix, where);
  const Ref root = u.run();
  AVDIT_REQUIRE(u.at(root).kind == Kind::Dict, "{}: the checkpoint holds {}, not a state dict",
                where, kind_name(u.at(root).kind));
  // get_turbo_vaed's choice: ema_state_dict, else state_dict, else the top level.
  Ref sd = root;
  std::string chosen;
  for (const char* key : {"ema_state_dict", "state_dict"})
    if (const auto r = lookup(u, root, key)) {
      AVDIT_REQUIRE(u.at(*r).kind == Kind::Dict, "{}: '{}' is {}, not a state dict", where, key,
                    kind_name(u.at(*r).kind));
      sd = *r;
      chosen = key;
      break;
    }
  std::vector<TensorInfo> infos;
  std::map<std::string, bool> seen;
  const std::vector<Ref>& items = u.at(sd).items;
  for (size_t k = 0; k + 1 < items.size(); k += 2) {
    const Value& key = u.at(items[k]);
    const Value& value = u.at(items[k + 1]);
    if (value.kind != Kind::Tensor) continue;  // a non-tensor entry is no weight
    AVDIT_REQUIRE(key.kind == Kind::Str, "{}: a state dict key is {}, not a string", where,
                  kind_name(key.kind));
    std::string name = key.s.starts_with("module.") ? key.s.substr(7) : key.s;
    AVDIT_REQUIRE(!seen[name], "{}: two tensors named '{}' (after stripping 'module.')", where,
                  name);
    seen[name] = true;
    const TensorRef& t = u.tensors()[static_cast<size_t>(value.i)];
    const StorageRef& s = u.storages()[static_cast<size_t>(t.storage)];
    // Contiguous in its storage (row-major strides; a dimension of size 1 may have any stride).
    int64_t expect = 1;
    for (size_t d = t.shape.size(); d-- > 0;) {
      AVDIT_REQUIRE(t.shape[d] == 1 || t.stride[d] == expect,
                    "{}: tensor '{}' of shape {} has strides [{}], not contiguous; avdit maps "
                    "tensors as stored (save them .contiguous())",
                    where, name, shape_str(t.shape), fmt::join(t.stride, ", "));
      expect *= t.shape[d];
    }
    const int64_t numel = shape_numel(t.shape);
    const uint64_t begin =
        s.begin + static_cast<uint64_t>(*checked::nbytes(t.offset, dtype_bits(s.dtype)));
    const uint64_t bytes = static_cast<uint64_t>(*checked::nbytes(numel, dtype_bits(s.dtype)));
    infos.push_back({std::move(name), s.dtype, t.shape, begin, begin + bytes});
  }
  std::map<std::string, std::string> metadata = {{"format", "pytorch"}};
  if (!chosen.empty()) metadata["state_dict"] = chosen;
  return SafetensorsFile::from_views(std::move(owner), size, path, std::move(infos),
                                     std::move(metadata));
}

std::shared_ptr<SafetensorsFile> open_torch_checkpoint(const fs::path& path) {
  MappedFile m = map_regular_file(path);
  return torch_checkpoint_from_memory(std::move(m.data), m.size, path);
}

TensorMap read_torch_checkpoint(const fs::path& path) {
  const auto f = open_torch_checkpoint(path);
  TensorMap out;
  for (const auto& t : f->tensors()) out[t.name] = f->get(t.name);
  return out;
}

}  // namespace avdit
