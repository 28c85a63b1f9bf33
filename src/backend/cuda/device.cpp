// Device context, error checks and device tensor allocation / copies (see device.h).
#include "backend/cuda/device.h"

#include <cstdint>
#include <memory>
#include <utility>

namespace avdit::cuda {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw RuntimeFailure(fmt::format("CUDA error at {}:{}: {} ({}: {})", file, line, expr,
                                   cudaGetErrorName(err), cudaGetErrorString(err)));
}

void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line) {
  throw RuntimeFailure(fmt::format("cuBLAS error at {}:{}: {} ({}: {})", file, line, expr,
                                   cublasGetStatusName(st), cublasGetStatusString(st)));
}

Device::Device(int ordinal, size_t workspace_bytes) : ordinal_(ordinal), workspace_bytes_(workspace_bytes) {
  int count = 0;
  AVDIT_CUDA_CHECK(cudaGetDeviceCount(&count));
  AVDIT_REQUIRE(ordinal >= 0 && ordinal < count, "CUDA device {} requested, {} present", ordinal, count);
  AVDIT_CUDA_CHECK(cudaSetDevice(ordinal));
  AVDIT_CUDA_CHECK(cudaGetDeviceProperties(&props_, ordinal));
  AVDIT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  handle_ = std::make_shared<StreamHandle>();
  handle_->stream = stream_;
  // Keep freed blocks in the pool across synchronisations: without this the driver trims the pool at
  // every stream sync and the next forward maps its memory again.
  cudaMemPool_t pool = nullptr;
  AVDIT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, ordinal));
  uint64_t keep_all = UINT64_MAX;
  AVDIT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  AVDIT_CUBLAS_CHECK(cublasCreate(&blas_));
  AVDIT_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
  // fp32 accumulation everywhere: no reduced-precision split-K reductions in half types.
  AVDIT_CUBLAS_CHECK(cublasSetMathMode(
      blas_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                       CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  AVDIT_CUBLAS_CHECK(cublasLtCreate(&lt_));
  if (workspace_bytes_) AVDIT_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

Device::~Device() {
  // Destructors must not throw: errors here are ignored (the process is usually ending).
  if (stream_) cudaStreamSynchronize(stream_);
  if (handle_) handle_->alive = false;  // tensors still alive now free synchronously (cuda_empty)
  if (workspace_) cudaFree(workspace_);
  if (lt_) cublasLtDestroy(lt_);
  if (blas_) cublasDestroy(blas_);
  if (stream_) cudaStreamDestroy(stream_);
}

void Device::synchronize() const { AVDIT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void require_cuda(const Tensor& t, const char* what) {
  AVDIT_REQUIRE(t.defined(), "{}: undefined tensor", what);
  AVDIT_REQUIRE(t.device() == avdit::Device::CUDA, "{}: expected a CUDA tensor, got a host tensor {}",
                what, t.shape_str());
}

Tensor cuda_empty(Device& dev, Shape shape, DType dtype) {
  for (int64_t d : shape) AVDIT_CHECK(d >= 0, "negative dimension in {}", shape_str(shape));
  const int64_t bytes = dtype_nbytes(dtype, shape_numel(shape));
  AVDIT_CUDA_CHECK(cudaSetDevice(dev.ordinal()));
  void* p = nullptr;
  if (bytes > 0) {
    cudaError_t err = cudaMallocAsync(&p, static_cast<size_t>(bytes), dev.stream());
    if (err == cudaErrorMemoryAllocation) {
      // The pool may hold free blocks too fragmented for this request, or memory other allocators
      // (cuBLAS, cuDNN) need: wait for queued frees, hand the pool's idle memory back, try once more.
      (void)cudaGetLastError();
      dev.synchronize();
      cudaMemPool_t pool = nullptr;
      AVDIT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev.ordinal()));
      AVDIT_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
      err = cudaMallocAsync(&p, static_cast<size_t>(bytes), dev.stream());
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw RuntimeFailure(fmt::format(
          "out of GPU memory allocating {} bytes for a {} {} tensor ({}; {} of {} bytes free): use a smaller "
          "input, --nvfp4-experts, or a GPU with more memory",
          bytes, dtype_name(dtype), shape_str(shape), cudaGetErrorString(err), free_b, total_b));
    }
  }
  // Freed on the device's stream, ordered after every op already enqueued there (the ones reading it).
  std::shared_ptr<const void> owner(p, [h = dev.stream_handle()](const void* q) {
    if (!q) return;
    if (h->alive) cudaFreeAsync(const_cast<void*>(q), h->stream);
    else cudaFree(const_cast<void*>(q));
  });
  return Tensor::wrap(std::move(owner), p, std::move(shape), dtype, avdit::Device::CUDA);
}

Tensor to_device(Device& dev, const Tensor& host) {
  AVDIT_REQUIRE(host.defined() && host.device() == avdit::Device::CPU, "to_device: expected a host tensor");
  Tensor t = cuda_empty(dev, host.shape(), host.dtype());
  if (t.nbytes() > 0) {
    AVDIT_CUDA_CHECK(cudaMemcpyAsync(device_ptr(t), host.raw(), static_cast<size_t>(t.nbytes()),
                                     cudaMemcpyHostToDevice, dev.stream()));
    dev.synchronize();  // the host buffer may be pageable and short-lived
  }
  return t;
}

Tensor to_host(Device& dev, const Tensor& device_tensor) {
  require_cuda(device_tensor, "to_host");
  Tensor h = Tensor::empty(device_tensor.shape(), device_tensor.dtype());
  if (h.nbytes() > 0) {
    AVDIT_CUDA_CHECK(cudaMemcpyAsync(h.mutable_raw(), device_tensor.raw(), static_cast<size_t>(h.nbytes()),
                                     cudaMemcpyDeviceToHost, dev.stream()));
  }
  dev.synchronize();
  return h;
}

}  // namespace avdit::cuda
