// The clock sampler of the benchmarks (src/bench/gpu_clock.h): the summary of a window of readings,
// the sampling thread's window (first and last reading, restart, dropped readings) on a fake
// source, and NVML's absence or an unknown GPU reported rather than thrown.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "bench/gpu_clock.h"

namespace avdit::bench {
namespace {

TEST(GpuClock, SummaryOfReadings) {
  const std::vector<ClockSample> s = {
      {1500, 600000, kReasonSwPowerCap},
      {1980, 300000, 0},
      {1600, 650000, kReasonSwPowerCap | kReasonHwThermal},
      {1700, 450000, kReasonSwThermal},
  };
  const ClockSummary c = summarize(s);
  EXPECT_EQ(c.samples, 4);
  EXPECT_DOUBLE_EQ(c.sm_mhz_mean, (1500.0 + 1980 + 1600 + 1700) / 4);
  EXPECT_DOUBLE_EQ(c.sm_mhz_min, 1500.0);
  EXPECT_DOUBLE_EQ(c.sm_mhz_max, 1980.0);
  EXPECT_DOUBLE_EQ(c.watts_mean, (600.0 + 300 + 650 + 450) / 4);
  EXPECT_DOUBLE_EQ(c.power_capped, 0.5);  // readings 0 and 2
  EXPECT_DOUBLE_EQ(c.slowdown, 0.5);      // readings 2 (hardware thermal) and 3 (software thermal)

  const ClockSummary none = summarize({});
  EXPECT_EQ(none.samples, 0);
  EXPECT_EQ(none.sm_mhz_mean, 0.0);
  EXPECT_EQ(none.power_capped, 0.0);
}

// A source whose k-th successful reading says k MHz: a window's summary then shows which readings
// it holds (min = first, max = last, mean = their midpoint when none is missing).
TEST(GpuClock, SamplerWindowOnFakeSource) {
  std::atomic<unsigned> next{0};
  ClockSampler sampler(
      [&](ClockSample& c) {
        c.sm_mhz = next++;
        c.power_mw = 1000 * c.sm_mhz;
        return true;
      },
      1.0);
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const ClockSummary a = sampler.stop();
  ASSERT_GE(a.samples, 2);  // the reading at start() and the one at stop(), at least
  EXPECT_EQ(a.sm_mhz_min, 0.0);
  EXPECT_EQ(a.sm_mhz_max, double(a.samples - 1));
  EXPECT_DOUBLE_EQ(a.sm_mhz_mean, (a.samples - 1) / 2.0);
  EXPECT_DOUBLE_EQ(a.watts_mean, a.sm_mhz_mean);

  // A second window holds only its own readings.
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const ClockSummary b = sampler.stop();
  ASSERT_GE(b.samples, 2);
  EXPECT_EQ(b.sm_mhz_min, double(a.samples));
  EXPECT_EQ(b.sm_mhz_max, double(next.load() - 1));
  EXPECT_EQ(b.samples, int64_t(next.load()) - a.samples);
}

TEST(GpuClock, FailedReadingsAreDropped) {
  std::atomic<unsigned> calls{0};
  ClockSampler sampler(
      [&](ClockSample& c) {
        const unsigned k = calls++;
        c.sm_mhz = 1000 + k;
        return k % 2 == 0;  // every other reading fails
      },
      1.0);
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const ClockSummary s = sampler.stop();
  EXPECT_EQ(s.samples, int64_t((calls.load() + 1) / 2));
  EXPECT_EQ(s.sm_mhz_min, 1000.0);  // the first reading succeeded
  // Destroying a running sampler stops its thread.
  ClockSampler running(
      [](ClockSample& c) {
        c.sm_mhz = 1;
        return true;
      },
      1.0);
  running.start();
}

// No NVML (CI) or a GPU NVML does not know: null and a reason, never a throw or a crash.
TEST(GpuClock, NvmlMissingOrUnknownGpuIsReported) {
  std::string why;
  const auto s = ClockSampler::open_nvml("ffff:ff:1f.7", &why);
  EXPECT_EQ(s, nullptr);
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace avdit::bench
