// libFuzzer target: the safetensors header parser and tensor access. Any byte string must either
// parse into a table whose every byte range lies inside the buffer, or be refused with BadInput;
// never crash, hang or read out of bounds. The byte range of each accepted tensor is recomputed
// here in 128-bit arithmetic, independently of the parser's own checked arithmetic.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/dtype.h"
#include "core/error.h"
#include "io/safetensors.h"

namespace {

// Independent of core/checked.h: numel and bytes in unsigned 128-bit arithmetic. A running
// product above 2^64 cannot be a tensor that fits in a buffer, and keeping it below that bound
// before each multiplication by a 64-bit dim means the product never wraps.
bool range_ok(const avdit::TensorInfo& t, uint64_t data_size) {
  unsigned __int128 numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0) return false;
    numel *= static_cast<uint64_t>(d);
    if (numel > (static_cast<unsigned __int128>(1) << 64)) return false;
  }
  const unsigned __int128 bytes = (numel * avdit::dtype_bits(t.dtype) + 7) / 8;
  return t.begin <= t.end && t.end <= data_size && bytes == t.end - t.begin;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly-sized buffer, so ASan sees any read past its end.
  std::shared_ptr<char[]> buf(new char[size ? size : 1]);
  if (size) std::memcpy(buf.get(), data, size);
  try {
    auto f = avdit::SafetensorsFile::from_memory(std::shared_ptr<const void>(buf, buf.get()), size,
                                                 "fuzz-input");
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = (header << 8) | data[i];
    const uint64_t data_size = size - 8 - header;
    uint64_t sum = 0;
    for (const auto& t : f->tensors()) {
      if (!range_ok(t, data_size))
        std::abort();  // the parser accepted a range that is not the tensor's
      const avdit::Tensor x = f->get(t.name);
      if (x.nbytes() != static_cast<int64_t>(t.end - t.begin)) std::abort();
      if (x.nbytes() > 0) {
        sum += static_cast<const uint8_t*>(x.raw())[0];
        sum += static_cast<const uint8_t*>(x.raw())[x.nbytes() - 1];
      }
      if (!t.shape.empty() && t.shape[0] > 0) {
        const int64_t rows = t.shape[0];
        const avdit::Tensor r = f->get_rows(t.name, rows / 2, rows);
        if (r.nbytes() > 0) sum += static_cast<const uint8_t*>(r.raw())[r.nbytes() - 1];
        try {
          (void)f->get_rows(t.name, rows, rows + 1);  // past the end: BadInput
          std::abort();
        } catch (const avdit::BadInput&) {
        }
      }
    }
    (void)sum;
  } catch (const avdit::BadInput&) {
  }
  return 0;
}
