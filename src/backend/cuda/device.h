// The CUDA device context, passed explicitly to every op (no singletons): one stream, the cuBLAS
// and cuBLASLt handles bound to it, a GEMM workspace; plus device tensors and host<->device copies.
// Error checks turn CUDA/cuBLAS failures into avdit::RuntimeFailure naming file:line and the error.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <memory>

#include "core/error.h"
#include "core/tensor.h"

namespace avdit::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line);

#define AVDIT_CUDA_CHECK(expr)                                                                  \
  do {                                                                                          \
    const cudaError_t avdit_err_ = (expr);                                                      \
    if (avdit_err_ != cudaSuccess) ::avdit::cuda::throw_cuda_error(avdit_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define AVDIT_CUBLAS_CHECK(expr)                                                                  \
  do {                                                                                            \
    const cublasStatus_t avdit_st_ = (expr);                                                      \
    if (avdit_st_ != CUBLAS_STATUS_SUCCESS)                                                       \
      ::avdit::cuda::throw_cublas_error(avdit_st_, #expr, __FILE__, __LINE__);                    \
  } while (0)

// After a kernel launch: catches bad launch configurations at once (asynchronous faults surface
// at the next synchronising call, which is checked too).
#define AVDIT_CUDA_CHECK_LAUNCH() AVDIT_CUDA_CHECK(cudaGetLastError())

// One GPU and one stream. Ops enqueue on stream() and never synchronise unless they hand memory
// back to the host. Not copyable: it owns the handles. Device memory comes from CUDA's stream-ordered
// pool on that stream (cuda_empty): a tensor released while queued work still reads it is safe, since
// the block is reused only by work enqueued later on the same stream. Use a Device from one host thread.
class Device {
 public:
  explicit Device(int ordinal = 0, size_t workspace_bytes = 32u << 20);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int ordinal() const { return ordinal_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  cublasLtHandle_t lt() const { return lt_; }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  const cudaDeviceProp& props() const { return props_; }
  void synchronize() const;

  // The stream, as the deleters of this device's tensors see it: `alive` turns false when the Device
  // goes, so a tensor outliving it is freed with a plain (synchronous) cudaFree instead.
  struct StreamHandle {
    cudaStream_t stream = nullptr;
    std::atomic<bool> alive{true};
  };
  const std::shared_ptr<StreamHandle>& stream_handle() const { return handle_; }

 private:
  int ordinal_ = 0;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<StreamHandle> handle_;
  cublasHandle_t blas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  cudaDeviceProp props_{};
};

// An uninitialised device tensor from the device's stream-ordered pool (cudaMallocAsync on dev.stream();
// returned to the pool, without synchronising, when the last handle goes). The pool keeps freed blocks
// for reuse (release threshold: unlimited), so steady-state forwards allocate without driver calls.
Tensor cuda_empty(Device& dev, Shape shape, DType dtype);
// Copies a host tensor to the device (same dtype, same shape). Returns once the copy is done, so
// the host tensor may be released at once.
Tensor to_device(Device& dev, const Tensor& host);
// Copies a device tensor to a new host tensor (synchronises the stream first).
Tensor to_host(Device& dev, const Tensor& device_tensor);

// Device tensors are built with Tensor::wrap, which marks them read-only (the flag is meant for
// memory-mapped files). The backend owns that memory, so kernels write through this accessor.
inline void* device_ptr(const Tensor& t) { return const_cast<void*>(t.raw()); }

// Stream-ordered scratch memory (cudaMallocAsync), freed once the work enqueued before the free has run.
struct StreamBuffer {
  cudaStream_t stream;
  void* p = nullptr;
  StreamBuffer(cudaStream_t s, size_t bytes) : stream(s) {
    if (bytes > 0) AVDIT_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream));
  }
  ~StreamBuffer() {
    if (p) cudaFreeAsync(p, stream);
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
};

// Throws BadInput unless t is defined and lives on the CUDA device; `what` names the operand.
void require_cuda(const Tensor& t, const char* what);

}  // namespace avdit::cuda
