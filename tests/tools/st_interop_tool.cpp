// The C++ side of the safetensors interop check (recipe v1 in python/st_interop.py):
//   st_interop_tool write OUT.safetensors   writes the recipe with avdit's writer
//   st_interop_tool check IN.safetensors    reads a file with avdit's reader, compares bit-exactly
#include <bit>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/error.h"
#include "io/safetensors.h"

using namespace avdit;

namespace {

constexpr int kN = 256;
const std::map<DType, std::vector<uint64_t>> kSpecial = {
    {DType::F16, {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x83FF, 0x7BFF}},
    {DType::BF16, {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x807F, 0x7F7F}},
    {DType::F32, {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF}},
    {DType::F64,
     {0, 0x8000000000000000ull, 0x7FF0000000000000ull, 0xFFF0000000000000ull, 0x7FF8000000000000ull, 1,
      0x800FFFFFFFFFFFFFull, 0x7FEFFFFFFFFFFFFFull}},
};

Tensor float_tensor(DType dt) {
  Tensor t = Tensor::empty({16, 16}, dt);
  for (int i = 0; i < kN; ++i) {
    const double v = (i - 128) / 4.0;
    char* p = static_cast<char*>(t.mutable_raw());
    if (i < 8) {
      const uint64_t bits = kSpecial.at(dt)[static_cast<size_t>(i)];
      std::memcpy(p + i * (dtype_bits(dt) / 8), &bits, static_cast<size_t>(dtype_bits(dt) / 8));
    } else {
      convert(&v, DType::F64, p + i * (dtype_bits(dt) / 8), dt, 1);
    }
  }
  return t;
}

template <class T>
Tensor int_tensor(DType dt, int width) {
  Tensor t = Tensor::empty({16, 16}, dt);
  T* p = t.data<T>();
  for (int i = 0; i < kN; ++i) {
    if (width == 8) p[i] = static_cast<T>(i - 128);
    else if (i == 255) p[i] = static_cast<T>((uint64_t{1} << (width - 1)) - 1);
    else p[i] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(i - 128) << (width - 8)));
  }
  return t;
}

std::vector<std::pair<std::string, Tensor>> recipe() {
  std::vector<std::pair<std::string, Tensor>> r;
  r.emplace_back("f64", float_tensor(DType::F64));
  r.emplace_back("f32", float_tensor(DType::F32));
  r.emplace_back("f16", float_tensor(DType::F16));
  r.emplace_back("bf16", float_tensor(DType::BF16));
  Tensor e4 = Tensor::empty({16, 16}, DType::F8_E4M3), u8 = Tensor::empty({16, 16}, DType::U8);
  Tensor b = Tensor::empty({4, 4, 16}, DType::Bool);
  for (int i = 0; i < kN; ++i) {
    e4.data<uint8_t>()[i] = static_cast<uint8_t>(i);
    u8.data<uint8_t>()[i] = static_cast<uint8_t>(i);
    b.data<uint8_t>()[i] = i % 3 == 0;
  }
  r.emplace_back("f8e4m3", e4);
  r.emplace_back("u8", u8);
  r.emplace_back("i8", int_tensor<int8_t>(DType::I8, 8));
  r.emplace_back("i16", int_tensor<int16_t>(DType::I16, 16));
  r.emplace_back("i32", int_tensor<int32_t>(DType::I32, 32));
  r.emplace_back("i64", int_tensor<int64_t>(DType::I64, 64));
  r.emplace_back("bool", b);
  r.emplace_back("scalar", Tensor::from_floats({1.5f}, {}));
  r.emplace_back("empty", Tensor::zeros({0, 3}, DType::I64));
  return r;
}

int check(const char* path) {
  auto f = SafetensorsFile::open(path);
  int bad = 0;
  const auto want = recipe();
  for (const auto& [name, w] : want) {
    const TensorInfo* info = f->find(name);
    if (!info) {
      std::fprintf(stderr, "%s: missing tensor %s\n", path, name.c_str());
      ++bad;
      continue;
    }
    const Tensor g = f->get(name);
    if (g.dtype() != w.dtype() || g.shape() != w.shape() ||
        std::memcmp(g.raw(), w.raw(), static_cast<size_t>(w.nbytes())) != 0) {
      std::fprintf(stderr, "%s: tensor %s differs\n", path, name.c_str());
      ++bad;
    }
  }
  if (f->tensors().size() != want.size()) {
    std::fprintf(stderr, "%s: %zu tensors, expected %zu\n", path, f->tensors().size(), want.size());
    ++bad;
  }
  std::printf("%s: %zu of %zu tensors bit-exact\n", path, want.size() - static_cast<size_t>(bad), want.size());
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: st_interop_tool write|check FILE\n");
    return 2;
  }
  try {
    if (std::strcmp(argv[1], "write") == 0) {
      write_safetensors(argv[2], recipe(), {{"writer", "avdit st_interop_tool"}, {"recipe", "v1"}});
      return 0;
    }
    if (std::strcmp(argv[1], "check") == 0) return check(argv[2]);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.exit_code();
  }
  return 2;
}
