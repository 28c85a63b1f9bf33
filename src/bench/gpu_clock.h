// The GPU's SM clock, power reading and clock-limit reasons while a benchmark stage runs, sampled
// from NVML on a thread.
//
// Why: under the MAGI-2 MoE layer's load an H200 reaches its 700 W cap and runs its SMs at
// 1.5-1.65 GHz instead of 1.98 (bench/NOTES.md, session 15: nvidia-smi beside `bench moe`), so a
// stage's time means little without the clock it ran at, and two runs can differ by their clock
// alone. NVML is the driver's own library: it is loaded with dlopen at run time, so building needs
// nothing new, and a machine without it (CI) gets "no clock" rather than an error.
// The sampling is not free: with it on, `bench moe`'s routed core medians rose by up to 0.4 ms (and
// far more on one machine; NOTES session 16), so benchmarks take it as an option, off by default.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace avdit::bench {

struct ClockSample {
  unsigned sm_mhz = 0;
  unsigned power_mw = 0;  // NVML's power reading: the driver averages it over its own window
  uint64_t reasons = 0;   // NVML's clocks-event reasons, the bits below
};

// NVML's clocks-event reason bits (nvmlClocksEventReason*) that lower the clock.
constexpr uint64_t kReasonSwPowerCap = 0x4;
constexpr uint64_t kReasonHwSlowdown = 0x8;
constexpr uint64_t kReasonSwThermal = 0x20;
constexpr uint64_t kReasonHwThermal = 0x40;
constexpr uint64_t kReasonHwPowerBrake = 0x80;

struct ClockSummary {
  int64_t samples = 0;
  double sm_mhz_mean = 0, sm_mhz_min = 0, sm_mhz_max = 0;
  double watts_mean = 0;
  double power_capped = 0;  // fraction of samples with the SW power cap active
  double slowdown = 0;      // fraction with a thermal or hardware slowdown (any of the other bits)
};
// All zero for no samples.
ClockSummary summarize(const std::vector<ClockSample>& samples);

// Samples a source every period_ms on its own thread between start() and stop().
class ClockSampler {
 public:
  // One reading; false when it failed (the sample is dropped).
  using Source = std::function<bool(ClockSample&)>;

  // NVML for the GPU at this PCI bus id (cudaDeviceGetPCIBusId's form, e.g. "0000:65:00.0"). Null,
  // with *why saying what is missing, when NVML cannot be loaded or does not know the GPU.
  static std::unique_ptr<ClockSampler> open_nvml(const std::string& pci_bus_id, std::string* why,
                                                 double period_ms = 2.0);

  ClockSampler(Source source, double period_ms);
  ~ClockSampler();  // stops a running thread
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;

  // Begins sampling (one reading right away); a running sampler is restarted.
  void start();
  // Ends sampling (one last reading) and summarises the samples since start().
  ClockSummary stop();

 private:
  void run();
  Source source_;
  double period_ms_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<ClockSample> samples_;
};

}  // namespace avdit::bench
