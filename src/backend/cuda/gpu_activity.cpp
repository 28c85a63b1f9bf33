// GpuActivityProbe over CUPTI's activity API: CUPTI fills buffers we hand it with one record per
// kernel / memset / memcpy (CONCURRENT_KERNEL: recording does not serialise kernels), and gives them
// back when full or flushed; we only count records and sum end - start.
#include "backend/cuda/gpu_activity.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/error.h"

#if AVDIT_HAVE_CUPTI
#include <cupti.h>
#endif

namespace avdit::cuda {

#if AVDIT_HAVE_CUPTI
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;  // ~5,000 kernel records each

struct Totals {
  std::mutex mu;
  GpuActivity acc;
};
Totals& totals() {
  static Totals t;
  return t;
}
std::atomic<bool> probe_exists{false};  // one probe at a time
std::atomic<bool> counting{false};      // records handed back now are added to totals()

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  throw RuntimeFailure(fmt::format("CUPTI {} failed: {} (the launch counts of -v need CUPTI; another profiler "
                                   "attached to this process, e.g. nsys, also makes this fail)",
                                   what, msg ? msg : "unknown error"));
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  GpuActivity got;
  CUpti_Activity* rec = nullptr;
  auto ms = [](uint64_t start, uint64_t end) { return end > start ? static_cast<double>(end - start) * 1e-6 : 0.0; };
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        ++got.kernels;
        got.kernel_ms += ms(k->start, k->end);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        ++got.memsets;
        got.memset_ms += ms(m->start, m->end);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        ++got.memcpys;
        got.memcpy_ms += ms(m->start, m->end);
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
  if (!counting.load()) return;  // work from before the probe, or a flush while stopping
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mu);
  t.acc.kernels += got.kernels;
  t.acc.memsets += got.memsets;
  t.acc.memcpys += got.memcpys;
  t.acc.kernel_ms += got.kernel_ms;
  t.acc.memset_ms += got.memset_ms;
  t.acc.memcpy_ms += got.memcpy_ms;
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET,
                                         CUPTI_ACTIVITY_KIND_MEMCPY};

}  // namespace

bool GpuActivityProbe::available() { return true; }

GpuActivityProbe::GpuActivityProbe() {
  bool expected = false;
  AVDIT_REQUIRE(probe_exists.compare_exchange_strong(expected, true), "GpuActivityProbe: one probe at a time");
  try {
    static std::once_flag registered;
    std::call_once(registered, [] {
      check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "activity callback registration");
    });
    check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");  // drops older records
    {
      std::lock_guard<std::mutex> lock(totals().mu);
      totals().acc = {};
    }
    counting = true;
    for (CUpti_ActivityKind k : kKinds) check(cuptiActivityEnable(k), "activity enable");
  } catch (...) {
    counting = false;
    probe_exists = false;
    throw;
  }
}

GpuActivityProbe::~GpuActivityProbe() {
  for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
  counting = false;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  probe_exists = false;
}

GpuActivity GpuActivityProbe::take() {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
  std::lock_guard<std::mutex> lock(totals().mu);
  GpuActivity out = totals().acc;
  totals().acc = {};
  return out;
}

#else  // no CUPTI in this build

bool GpuActivityProbe::available() { return false; }
GpuActivityProbe::GpuActivityProbe() {
  throw BadInput("GPU activity counts need CUPTI: this avdit was configured without CUDA::cupti (part of the CUDA "
                 "toolkit; reinstall it with scripts/setup.sh)");
}
GpuActivityProbe::~GpuActivityProbe() = default;
GpuActivity GpuActivityProbe::take() { return {}; }

#endif

}  // namespace avdit::cuda
