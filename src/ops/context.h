// The execution context every op takes: where its tensors live and where it runs. The CPU context
// is the float32 oracle (bf16/f16 tensors are widened on the fly and results rounded to the output
// dtype); the CUDA context (backend/cuda/context.h) owns the device, its stream, GEMM plans and
// graph capture. Both carry the observer the model's named points report to.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/observer.h"
#include "core/tensor.h"

namespace avdit::ops {

class CudaContext;

class Context {
 public:
  explicit Context(Device kind) : kind_(kind) {}
  virtual ~Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return kind_; }
  bool is_cuda() const { return kind_ == Device::CUDA; }
  const char* name() const { return is_cuda() ? "cuda" : "cpu"; }

  // Memory on this context. empty() is uninitialised; zeros() is zero-filled.
  virtual Tensor empty(Shape shape, DType dtype) = 0;
  virtual Tensor zeros(Shape shape, DType dtype) = 0;
  // A host tensor on this context (CPU: the tensor itself), and back (CPU: itself; CUDA: waits).
  virtual Tensor upload(const Tensor& host) = 0;
  virtual Tensor download(const Tensor& t) = 0;
  // Waits for the work enqueued so far (CPU: nothing to wait for).
  virtual void synchronize() {}
  // Bytes of this context's tensors in use now, and the most in use since reset_pool_peak() (a
  // forward's peak activations: the peak minus what was in use before). CPU: every host tensor of
  // the process; CUDA: the device's memory pool.
  virtual int64_t pool_in_use() const = 0;
  virtual int64_t pool_peak() const = 0;
  virtual void reset_pool_peak() = 0;

  // Runs `body`, a fixed sequence of ops that reads its inputs from, and writes its outputs to,
  // tensors that keep their addresses for `key`, and releases everything else it allocates. The
  // CUDA context replays it from a CUDA graph from the second run of a key on (one launch instead
  // of one per op); the CPU just runs it, and so does the CUDA context while a probe attached
  // wants a point inside the body (a replay would not show it).
  virtual void run_fixed(uint64_t key, const std::function<void()>& body) {
    (void)key;
    body();
  }
  // Drops what run_fixed keeps for its keys (after the tensors they name were released).
  virtual void forget_fixed() {}

  // The CUDA context behind this one; RuntimeFailure on the CPU.
  CudaContext& cuda();
  // RuntimeFailure naming `what` unless t lives on this context.
  void require_here(const Tensor& t, const char* what) const;

  Observer& observer() { return observer_; }

 private:
  Device kind_;
  Observer observer_;
};

class CpuContext final : public Context {
 public:
  CpuContext() : Context(Device::CPU) {}
  Tensor empty(Shape shape, DType dtype) override;
  Tensor zeros(Shape shape, DType dtype) override;
  Tensor upload(const Tensor& host) override;
  Tensor download(const Tensor& t) override;
  int64_t pool_in_use() const override { return host_bytes_in_use(); }
  int64_t pool_peak() const override { return host_bytes_peak(); }
  void reset_pool_peak() override { reset_host_bytes_peak(); }
};

// Model-side observer calls. `observe` hands the tensor to the probes that want the point;
// `observe_lazy` computes it only when one does (a dump that needs a gather or a regroup);
// `observe_mut` lets a probe replace it. With no probe attached each is one branch.
inline void observe(Context& ctx, const Point& p, const Tensor& t) {
#if AVDIT_OBSERVER
  if (!ctx.observer().empty() && ctx.observer().wants(p)) {
    Tensor copy = t;
    ctx.observer().emit(ctx, p, copy);
  }
#else
  (void)ctx, (void)p, (void)t;
#endif
}

template <class F>
inline void observe_lazy(Context& ctx, const Point& p, F&& make) {
#if AVDIT_OBSERVER
  if (!ctx.observer().empty() && ctx.observer().wants(p)) {
    Tensor t = make();
    ctx.observer().emit(ctx, p, t);
  }
#else
  (void)ctx, (void)p, (void)make;
#endif
}

inline void observe_mut(Context& ctx, const Point& p, Tensor& t) {
#if AVDIT_OBSERVER
  if (!ctx.observer().empty() && ctx.observer().wants(p)) ctx.observer().emit(ctx, p, t);
#else
  (void)ctx, (void)p, (void)t;
#endif
}

// Whether any probe wants the point (for work that only a probe needs, e.g. keeping router logits).
inline bool observed(Context& ctx, const Point& p) {
#if AVDIT_OBSERVER
  return !ctx.observer().empty() && ctx.observer().wants(p);
#else
  (void)ctx, (void)p;
  return false;
#endif
}

}  // namespace avdit::ops
