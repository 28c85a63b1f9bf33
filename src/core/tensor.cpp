// Tensor storage, views and conversions (CPU side; CUDA allocation lives in the CUDA backend).
#include "core/tensor.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/checked.h"
#include "core/error.h"

namespace avdit {

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {
std::atomic<int64_t> g_host_in_use{0}, g_host_peak{0};
}  // namespace

int64_t host_bytes_in_use() { return g_host_in_use.load(std::memory_order_relaxed); }
int64_t host_bytes_peak() { return g_host_peak.load(std::memory_order_relaxed); }
void reset_host_bytes_peak() { g_host_peak.store(host_bytes_in_use(), std::memory_order_relaxed); }

int64_t shape_numel(const Shape& shape) {
  const std::optional<int64_t> n = checked::numel(shape);
  if (n) return *n;
  for (int64_t d : shape) AVDIT_CHECK(d >= 0, "negative dimension in {}", avdit::shape_str(shape));
  throw BadInput(
      fmt::format("a tensor of shape {} would have more than 2^56 elements (a size from a file, "
                  "config or option "
                  "is implausible)",
                  avdit::shape_str(shape)));
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  AVDIT_CHECK(device == Device::CPU, "Tensor::empty on CUDA goes through the CUDA backend");
  for (int64_t d : shape) AVDIT_CHECK(d >= 0, "negative dimension in {}", avdit::shape_str(shape));
  const int64_t bytes = dtype_nbytes(dtype, shape_numel(shape));
  // 64-byte alignment suits SIMD loops and BLAS; aligned_alloc needs a size that is a non-zero
  // multiple of the alignment.
  const int64_t rounded = std::max<int64_t>(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, static_cast<size_t>(rounded));
  if (!p) throw RuntimeFailure(fmt::format("out of host memory allocating {} bytes", bytes));
  const int64_t now = g_host_in_use.fetch_add(rounded, std::memory_order_relaxed) + rounded;
  for (int64_t peak = g_host_peak.load(std::memory_order_relaxed);
       now > peak && !g_host_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed);) {
  }
  Tensor t;
  t.storage_ = std::shared_ptr<const void>(p, [rounded](const void* q) {
    g_host_in_use.fetch_sub(rounded, std::memory_order_relaxed);
    std::free(const_cast<void*>(q));
  });
  t.base_ = p;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  std::memset(t.mutable_raw(), 0, static_cast<size_t>(t.nbytes()));
  return t;
}

Tensor Tensor::from_floats(std::vector<float> values, Shape shape) {
  AVDIT_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
              "from_floats: {} values for shape {}", values.size(), avdit::shape_str(shape));
  return from_data(std::move(shape), DType::F32, values.data());
}

Tensor Tensor::from_data(Shape shape, DType dtype, const void* src) {
  Tensor t = empty(std::move(shape), dtype);
  if (t.nbytes()) std::memcpy(t.mutable_raw(), src, static_cast<size_t>(t.nbytes()));
  return t;
}

Tensor Tensor::wrap(std::shared_ptr<const void> owner, const void* data, Shape shape, DType dtype,
                    Device device) {
  Tensor t;
  t.storage_ = std::move(owner);
  t.base_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.readonly_ = true;
  return t;
}

int64_t Tensor::size(int dim) const {
  const int n = ndim();
  const int d = dim < 0 ? dim + n : dim;
  AVDIT_CHECK(d >= 0 && d < n, "dimension {} out of range for shape {}", dim, shape_str());
  return shape_[static_cast<size_t>(d)];
}

const void* Tensor::raw() const {
  AVDIT_CHECK(defined(), "use of an undefined tensor");
  return base_;
}

void* Tensor::mutable_raw() {
  AVDIT_CHECK(defined(), "use of an undefined tensor");
  AVDIT_CHECK(!readonly_, "write to a read-only (memory-mapped) tensor; clone() it first");
  return const_cast<void*>(base_);
}

const float* Tensor::f32() const {
  AVDIT_CHECK(dtype_ == DType::F32, "expected an F32 tensor, got {}", dtype_name(dtype_));
  AVDIT_CHECK(device_ == Device::CPU, "host access to a CUDA tensor");
  return static_cast<const float*>(raw());
}

float* Tensor::f32() {
  AVDIT_CHECK(dtype_ == DType::F32, "expected an F32 tensor, got {}", dtype_name(dtype_));
  AVDIT_CHECK(device_ == Device::CPU, "host access to a CUDA tensor");
  return static_cast<float*>(mutable_raw());
}

void Tensor::check_element_size(size_t bytes) const {
  AVDIT_CHECK(dtype_bits(dtype_) == static_cast<int>(bytes * 8),
              "element type of {} bytes does not match dtype {}", bytes, dtype_name(dtype_));
}

Tensor Tensor::reshape(Shape shape) const {
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      AVDIT_CHECK(infer < 0, "reshape: more than one -1 in {}", avdit::shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    AVDIT_CHECK(known > 0 && numel() % known == 0, "reshape {} -> {}", shape_str(),
                avdit::shape_str(shape));
    shape[static_cast<size_t>(infer)] = numel() / known;
  }
  AVDIT_CHECK(shape_numel(shape) == numel(), "reshape {} -> {}: element counts differ",
              shape_str(), avdit::shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  AVDIT_CHECK(ndim() >= 1, "slice_rows of a scalar");
  AVDIT_CHECK(0 <= begin && begin <= end && end <= shape_[0], "slice_rows [{}, {}) of {}", begin,
              end, shape_str());
  const int64_t row = shape_numel(Shape(shape_.begin() + 1, shape_.end()));
  AVDIT_CHECK((row * begin * dtype_bits(dtype_)) % 8 == 0, "slice_rows splits a byte");
  Tensor t = *this;
  t.base_ = static_cast<const char*>(base_) + dtype_nbytes(dtype_, row * begin);
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::select(int64_t index) const {
  Tensor t = slice_rows(index, index + 1);
  t.shape_.erase(t.shape_.begin());
  return t;
}

Tensor Tensor::to(DType dtype) const {
  AVDIT_CHECK(device_ == Device::CPU, "Tensor::to on a CUDA tensor");
  Tensor t = empty(shape_, dtype);
  convert(raw(), dtype_, t.mutable_raw(), dtype, numel());
  return t;
}

Tensor Tensor::to_f32() const { return dtype_ == DType::F32 ? *this : to(DType::F32); }

Tensor Tensor::clone() const { return to(dtype_); }

}  // namespace avdit
