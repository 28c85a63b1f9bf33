// libFuzzer target for the safetensors header parser: any byte string must either parse into a
// consistent tensor table or be rejected with BadInput; never crash, hang or read out of bounds.
#include <cstdint>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exactly-sized buffer so that ASan sees any read past the end.
  std::shared_ptr<char[]> buf(new char[size ? size : 1]);
  if (size) std::memcpy(buf.get(), data, size);
  try {
    auto f = avdit::SafetensorsFile::from_memory(std::shared_ptr<const void>(buf, buf.get()), size, "fuzz-input");
    uint64_t sum = 0;
    for (const auto& t : f->tensors()) {
      const avdit::Tensor x = f->get(t.name);
      if (x.nbytes() > 0) sum += static_cast<const uint8_t*>(x.raw())[x.nbytes() - 1];
      if (!t.shape.empty() && t.shape[0] > 0) (void)f->get_rows(t.name, 0, 1);
    }
    (void)sum;
  } catch (const avdit::BadInput&) {
  }
  return 0;
}
