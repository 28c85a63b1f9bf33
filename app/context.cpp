// --device and --precision for the commands (see context.h).
#include "context.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <functional>

#include "core/error.h"
#include "core/log.h"

#if AVDIT_HAVE_CUDA
#include "backend/cuda/context.h"
#include "backend/cuda/gpu_activity.h"
#endif

namespace avdit::app {

DType activation_dtype(const std::string& precision) {
  AVDIT_REQUIRE(precision == "fp32" || precision == "bf16" || precision == "fp16",
                "--precision {}: expected fp32, bf16 or fp16 (fp16: MiniMax-H3's recipe)", precision);
  return precision == "bf16" ? DType::BF16 : precision == "fp16" ? DType::F16 : DType::F32;
}

namespace {
std::string gib(int64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1u << 30));
}

class NoActivity final : public StepActivity {
 public:
  void wrap(std::function<void(int, int, double)>&) override {}
  std::string line() const override { return ""; }
};
}  // namespace

#if AVDIT_HAVE_CUDA

void set_attention_plan(ops::Context& ctx, const std::string& plan) {
  AVDIT_REQUIRE(plan == "default" || plan == "split" || plan == "ragged" || plan == "own",
                "--attention-plan {}: expected default, split, ragged or own", plan);
  if (plan == "default") return;
  AVDIT_REQUIRE(ctx.is_cuda(), "--attention-plan {}: a plan of the GPU's attention; use --device cuda",
                plan);
  ctx.cuda().set_segment_plan(plan == "split"    ? ops::SegmentPlan::Split
                              : plan == "ragged" ? ops::SegmentPlan::Ragged
                                                 : ops::SegmentPlan::Own);
}

std::unique_ptr<ops::Context> make_context(const std::string& device) {
  AVDIT_REQUIRE(device == "cpu" || device == "cuda", "--device {}: expected cpu or cuda", device);
  if (device == "cpu") return std::make_unique<ops::CpuContext>();
  return std::make_unique<ops::CudaContext>(0);
}

std::string memory_summary(ops::Context& ctx, int64_t weight_bytes) {
  if (!ctx.is_cuda()) return "";
  size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  std::string s =
      fmt::format("cuda: weights {}, device memory in use {} of {}", gib(weight_bytes),
                  gib(static_cast<int64_t>(total - free)), gib(static_cast<int64_t>(total)));
  const auto& g = ctx.cuda().graph_stats();
  if (g.captures > 0)
    s += fmt::format("; forward replayed from a CUDA graph ({} nodes; {} captures, {} replays)",
                     g.nodes, g.captures, g.replays);
  return s;
}

namespace {

// The launch-overhead figures of steps 2..N (the first step carries one-off work: kernel loading,
// cuDNN graph builds): what the GPU executed (CUPTI) and how much of the wall time it was busy.
// Installed as a wrapper of the pipeline's progress callback; synchronises the device after steps 1
// and N.
class CuptiActivity final : public StepActivity {
 public:
  explicit CuptiActivity(cuda::Device& dev) : dev_(dev) {}
  void wrap(std::function<void(int, int, double)>& progress) override {
    progress = [this, inner = progress](int done, int total, double seconds) {
      on_step(done, total);
      if (inner) inner(done, total, seconds);
    };
  }
  std::string line() const override {
    if (!cuda::GpuActivityProbe::available()) return "; no GPU launch counts (built without CUPTI)";
    if (off())
      return "; no GPU launch counts (AVDIT_LAUNCH_COUNTS=0: step times without CUPTI's host cost)";
    if (!error_.empty()) return "; no GPU launch counts: " + error_;
    if (steps_ == 0) return "";
    const double n = steps_;
    return fmt::format(
        "; steps 2-{}: {:.0f} launches per step ({:.0f} kernels, {:.0f} memsets, {:.0f} copies), "
        "GPU busy "
        "{:.2f} of {:.2f} ms per step ({:.0f}%)",
        steps_ + 1, got_.launches() / n, got_.kernels / n, got_.memsets / n, got_.memcpys / n,
        got_.busy_ms() / n, wall_ms_ / n, wall_ms_ > 0 ? 100.0 * got_.busy_ms() / wall_ms_ : 0.0);
  }

 private:
  // AVDIT_LAUNCH_COUNTS=0 leaves CUPTI out, so that the step-time line measures the steps as they
  // run without it (the probe adds host time to every launch it records).
  static bool off() {
    const char* v = std::getenv("AVDIT_LAUNCH_COUNTS");
    return v != nullptr && std::string(v) == "0";
  }
  void on_step(int done, int total) {
    if (!cuda::GpuActivityProbe::available() || total < 2 || off()) return;
    if (done == 1) {
      dev_.synchronize();
      try {
        probe_ = std::make_unique<cuda::GpuActivityProbe>();
      } catch (
          const std::exception& e) {  // the figures are optional: say why they are missing, go on
        error_ = e.what();
        return;
      }
      t0_ = std::chrono::steady_clock::now();
    } else if (done == total && probe_) {
      dev_.synchronize();
      wall_ms_ =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
      got_ = probe_->take();
      probe_.reset();
      steps_ = total - 1;
    }
  }
  cuda::Device& dev_;
  std::unique_ptr<cuda::GpuActivityProbe> probe_;
  std::chrono::steady_clock::time_point t0_;
  cuda::GpuActivity got_;
  double wall_ms_ = 0;
  int steps_ = 0;
  std::string error_;
};

}  // namespace

std::unique_ptr<StepActivity> step_activity(ops::Context& ctx) {
  if (!ctx.is_cuda()) return std::make_unique<NoActivity>();
  return std::make_unique<CuptiActivity>(ctx.cuda().dev());
}

#else  // no CUDA backend in this build

void set_attention_plan(ops::Context&, const std::string& plan) {
  AVDIT_REQUIRE(plan == "default" || plan == "split" || plan == "ragged" || plan == "own",
                "--attention-plan {}: expected default, split, ragged or own", plan);
  AVDIT_REQUIRE(plan == "default",
                "--attention-plan {}: a plan of the GPU's attention; this avdit has no CUDA backend",
                plan);
}

std::unique_ptr<ops::Context> make_context(const std::string& device) {
  AVDIT_REQUIRE(device == "cpu" || device == "cuda", "--device {}: expected cpu or cuda", device);
  AVDIT_REQUIRE(device == "cpu",
                "--device cuda: this avdit was built without the CUDA backend (configure with "
                "-DAVDIT_CUDA=ON on a "
                "machine with the CUDA toolkit), or use --device cpu");
  return std::make_unique<ops::CpuContext>();
}
std::unique_ptr<StepActivity> step_activity(ops::Context&) {
  return std::make_unique<NoActivity>();
}
std::string memory_summary(ops::Context&, int64_t) { return ""; }

#endif

}  // namespace avdit::app
