#include "bench/gpu_clock.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace avdit::bench {

ClockSummary summarize(const std::vector<ClockSample>& samples) {
  ClockSummary s;
  if (samples.empty()) return s;
  s.samples = static_cast<int64_t>(samples.size());
  s.sm_mhz_min = s.sm_mhz_max = samples[0].sm_mhz;
  double mhz = 0, mw = 0;
  int64_t capped = 0, slow = 0;
  constexpr uint64_t kSlowdown =
      kReasonHwSlowdown | kReasonSwThermal | kReasonHwThermal | kReasonHwPowerBrake;
  for (const ClockSample& c : samples) {
    mhz += c.sm_mhz;
    mw += c.power_mw;
    s.sm_mhz_min = std::min<double>(s.sm_mhz_min, c.sm_mhz);
    s.sm_mhz_max = std::max<double>(s.sm_mhz_max, c.sm_mhz);
    capped += (c.reasons & kReasonSwPowerCap) != 0;
    slow += (c.reasons & kSlowdown) != 0;
  }
  const double n = static_cast<double>(samples.size());
  s.sm_mhz_mean = mhz / n;
  s.watts_mean = mw / n / 1000.0;
  s.power_capped = static_cast<double>(capped) / n;
  s.slowdown = static_cast<double>(slow) / n;
  return s;
}

ClockSampler::ClockSampler(Source source, double period_ms)
    : source_(std::move(source)), period_ms_(period_ms) {}

ClockSampler::~ClockSampler() {
  if (thread_.joinable()) stop();
}

void ClockSampler::start() {
  if (thread_.joinable()) stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    samples_.clear();
    stopping_ = false;
    ClockSample first;  // here, not on the thread: a window always has its first and last reading
    if (source_(first)) samples_.push_back(first);
  }
  thread_ = std::thread([this] { run(); });
}

ClockSummary ClockSampler::stop() {
  if (!thread_.joinable()) return summarize(samples_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  ClockSample last;
  if (source_(last)) samples_.push_back(last);
  return summarize(samples_);
}

void ClockSampler::run() {
  const auto period = std::chrono::duration<double, std::milli>(period_ms_);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (cv_.wait_for(lock, period, [this] { return stopping_; })) return;
    ClockSample c;
    lock.unlock();  // the reading may take tens of microseconds; stop() must not wait on it
    const bool ok = source_(c);
    lock.lock();
    if (ok) samples_.push_back(c);
  }
}

namespace {

// The few NVML entry points used, declared by their C ABI (nvml.h need not be installed):
// nvmlReturn_t is an int (0 = success), nvmlDevice_t an opaque pointer.
struct Nvml {
  void* lib = nullptr;
  void* dev = nullptr;
  int (*shutdown)() = nullptr;
  int (*clock_info)(void*, int, unsigned*) = nullptr;
  int (*power_usage)(void*, unsigned*) = nullptr;
  int (*reasons)(void*, unsigned long long*) = nullptr;
  ~Nvml() {
    if (shutdown) shutdown();
    if (lib) dlclose(lib);
  }
};
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

template <typename F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

}  // namespace

std::unique_ptr<ClockSampler> ClockSampler::open_nvml(const std::string& pci_bus_id,
                                                      std::string* why, double period_ms) {
  auto fail = [&](std::string msg) -> std::unique_ptr<ClockSampler> {
    if (why) *why = std::move(msg);
    return nullptr;
  };
  auto n = std::make_shared<Nvml>();
  n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n->lib) return fail("libnvidia-ml.so.1 (the NVIDIA driver's NVML) could not be loaded");
  auto init = sym<int (*)()>(n->lib, "nvmlInit_v2");
  auto by_bus = sym<int (*)(const char*, void**)>(n->lib, "nvmlDeviceGetHandleByPciBusId_v2");
  auto err = sym<const char* (*)(int)>(n->lib, "nvmlErrorString");
  n->clock_info = sym<int (*)(void*, int, unsigned*)>(n->lib, "nvmlDeviceGetClockInfo");
  n->power_usage = sym<int (*)(void*, unsigned*)>(n->lib, "nvmlDeviceGetPowerUsage");
  // The reasons' newer name (drivers 535+), then the older one.
  n->reasons =
      sym<int (*)(void*, unsigned long long*)>(n->lib, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!n->reasons)
    n->reasons = sym<int (*)(void*, unsigned long long*)>(
        n->lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (!init || !by_bus || !n->clock_info || !n->power_usage || !n->reasons)
    return fail("libnvidia-ml.so.1 lacks an entry point used here (a driver older than 535?)");
  auto text = [&](int r) { return err ? std::string(err(r)) : fmt::format("NVML error {}", r); };
  if (const int r = init(); r != 0) return fail("nvmlInit: " + text(r));
  n->shutdown = sym<int (*)()>(n->lib, "nvmlShutdown");
  if (const int r = by_bus(pci_bus_id.c_str(), &n->dev); r != 0)
    return fail(
        fmt::format("NVML does not know the GPU at PCI bus id {}: {}", pci_bus_id, text(r)));
  Source read = [n](ClockSample& c) {
    unsigned long long reasons = 0;
    if (n->clock_info(n->dev, kNvmlClockSm, &c.sm_mhz) != 0) return false;
    if (n->power_usage(n->dev, &c.power_mw) != 0) c.power_mw = 0;
    if (n->reasons(n->dev, &reasons) == 0) c.reasons = reasons;
    return true;
  };
  ClockSample probe;
  if (!read(probe)) return fail("NVML cannot read the SM clock of the GPU at " + pci_bus_id);
  return std::make_unique<ClockSampler>(std::move(read), period_ms);
}

}  // namespace avdit::bench
