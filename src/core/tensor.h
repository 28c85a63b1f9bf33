// The tensor: a dtype, a shape and contiguous row-major storage on one device. Storage is shared
// (copying a Tensor copies a handle), may be owned or memory-mapped (read-only), and views that
// keep contiguity (reshape, leading-dim slices) never copy.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace avdit {

using Shape = std::vector<int64_t>;
enum class Device : uint8_t { CPU, CUDA };

std::string shape_str(const Shape& shape);
int64_t shape_numel(const Shape& shape);

// Bytes of host tensor storage (Tensor::empty) alive now, and the most alive since the last reset:
// the CPU context's counterpart of the CUDA pool's statistics (a forward's peak activations).
int64_t host_bytes_in_use();
int64_t host_bytes_peak();
void reset_host_bytes_peak();

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(Shape shape, DType dtype, Device device = Device::CPU);
  static Tensor zeros(Shape shape, DType dtype);
  static Tensor from_floats(std::vector<float> values, Shape shape);
  static Tensor from_data(Shape shape, DType dtype, const void* src);
  // Wraps memory owned by `owner` (a mapped file) without copying; the tensor is read-only.
  static Tensor wrap(std::shared_ptr<const void> owner, const void* data, Shape shape, DType dtype,
                     Device device = Device::CPU);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t size(int dim) const;
  int64_t numel() const { return shape_numel(shape_); }
  int64_t nbytes() const { return dtype_nbytes(dtype_, numel()); }
  bool readonly() const { return readonly_; }
  std::string shape_str() const { return avdit::shape_str(shape_); }

  const void* raw() const;
  void* mutable_raw();
  const float* f32() const;
  float* f32();
  template <class T>
  const T* data() const {
    check_element_size(sizeof(T));
    return static_cast<const T*>(raw());
  }
  template <class T>
  T* data() {
    check_element_size(sizeof(T));
    return static_cast<T*>(mutable_raw());
  }

  // Views (no copy).
  Tensor reshape(Shape shape) const;
  Tensor slice_rows(int64_t begin, int64_t end) const;
  Tensor select(int64_t index) const;

  // Copies.
  Tensor to(DType dtype) const;
  Tensor to_f32() const;  // the same storage when already F32
  Tensor clone() const;

 private:
  void check_element_size(size_t bytes) const;

  std::shared_ptr<const void> storage_;  // keeps the memory alive (owned buffer or mapping)
  const void* base_ = nullptr;           // first byte of this tensor
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
  bool readonly_ = false;
};

using TensorMap = std::map<std::string, Tensor>;

}  // namespace avdit
