#include "device_cuda.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <functional>

#include "core/error.h"
#include "core/log.h"

#if AVDIT_HAVE_CUDA
#include "backend/cuda/gpu_activity.h"
#include "backend/cuda/models/h3/model_cuda.h"
#include "backend/cuda/models/magi2/model.h"
#include "backend/cuda/sample_cuda.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "models/magi2/api.h"
#include "models/magi2/weights.h"
#endif

namespace avdit::app {

#if AVDIT_HAVE_CUDA

namespace {
std::string gib(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1u << 30)); }
}  // namespace

void check_device(const std::string& device) {
  AVDIT_REQUIRE(device == "cpu" || device == "cuda", "--device {}: expected cpu or cuda", device);
}

TensorMap forward_on_cuda(const Checkpoint& ckpt, const std::string& family, const TensorMap& inputs, bool dump,
                          bool bf16, bool nvfp4_experts) {
  cuda::Device dev;
  if (family == "magi2-preview") {
    cuda::magi2::CudaForwardStats stats;
    models::magi2::LoadOptions load;
    load.nvfp4_experts = nvfp4_experts;
    TensorMap out = cuda::magi2::forward_from_inputs_cuda(dev, ckpt, inputs, dump, bf16, &stats, load);
    log::info("cuda {}: weights {}, peak activations {}, {} launches per forward", bf16 ? "bf16" : "fp32",
              gib(stats.weight_bytes), gib(stats.peak_activation_bytes), stats.launches.total());
    return out;
  }
  AVDIT_REQUIRE(family == "h3", "avdit forward --device cuda does not run the {} family", family);
  const models::h3::H3Model host(ckpt);
  cuda::h3::H3CudaModel model(dev, host.config(), host.weights(),
                              bf16 ? cuda::h3::Precision::BF16 : cuda::h3::Precision::F32);
  TensorMap out = models::h3::forward_from_inputs(model, inputs, dump);
  log::info("cuda {}: weights {}, peak activations {}", bf16 ? "bf16" : "fp32", gib(model.weight_bytes()),
            gib(model.peak_activation_bytes()));
  return out;
}

namespace {

// The launch-overhead figures of steps 2..N (the first step carries one-off work: kernel loading, cuDNN
// graph builds): what the GPU executed (CUPTI) and how much of the wall time it was busy. Installed
// as a wrapper of the pipeline's progress callback; synchronises the device after steps 1 and N.
class StepActivity {
 public:
  explicit StepActivity(cuda::Device& dev) : dev_(dev) {}
  void wrap(std::function<void(int, int, double)>& progress) {
    progress = [this, inner = progress](int done, int total, double seconds) {
      on_step(done, total);
      if (inner) inner(done, total, seconds);
    };
  }
  std::string line() const {
    if (!cuda::GpuActivityProbe::available()) return "; no GPU launch counts (built without CUPTI)";
    if (off()) return "; no GPU launch counts (AVDIT_LAUNCH_COUNTS=0: step times without CUPTI's host cost)";
    if (!error_.empty()) return "; no GPU launch counts: " + error_;
    if (steps_ == 0) return "";
    const double n = steps_;
    return fmt::format(
        "; steps 2-{}: {:.0f} launches per step ({:.0f} kernels, {:.0f} memsets, {:.0f} copies), GPU busy "
        "{:.2f} of {:.2f} ms per step ({:.0f}%)",
        steps_ + 1, got_.launches() / n, got_.kernels / n, got_.memsets / n, got_.memcpys / n, got_.busy_ms() / n,
        wall_ms_ / n, wall_ms_ > 0 ? 100.0 * got_.busy_ms() / wall_ms_ : 0.0);
  }

 private:
  // AVDIT_LAUNCH_COUNTS=0 leaves CUPTI out, so that the step-time line measures the steps as they run
  // without it (the probe adds host time to every launch it records).
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
      } catch (const std::exception& e) {  // the figures are optional: say why they are missing, go on
        error_ = e.what();
        return;
      }
      t0_ = std::chrono::steady_clock::now();
    } else if (done == total && probe_) {
      dev_.synchronize();
      wall_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
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

class Magi2Run final : public CudaGenerate {
 public:
  Magi2Run(const Checkpoint& ckpt, bool bf16, const models::magi2::LoadOptions& load)
      : weights_(models::magi2::load_magi2_weights(ckpt, models::magi2::config_from_checkpoint(ckpt), load)),
        model_(dev_, weights_, bf16) {}
  cuda::Device dev_;
  models::magi2::Magi2Weights weights_;
  cuda::magi2::Magi2CudaModel model_;
  StepActivity activity_{dev_};
  std::string summary() const override {
    return fmt::format("cuda {}: weights {}, peak activations {}, {} launches per forward (counted in the model){}",
                       model_.bf16() ? "bf16" : "fp32", gib(model_.weight_bytes()),
                       gib(model_.peak_activation_bytes()), model_.launches().total(), activity_.line());
  }
};

class H3Run final : public CudaGenerate {
 public:
  H3Run(const Checkpoint& ckpt, bool bf16)
      : host_(ckpt),
        model_(dev_, host_.config(), host_.weights(), bf16 ? cuda::h3::Precision::BF16 : cuda::h3::Precision::F32) {}
  cuda::Device dev_;
  models::h3::H3Model host_;
  cuda::h3::H3CudaModel model_;
  StepActivity activity_{dev_};
  std::string summary() const override {
    const cuda::h3::H3CudaModel::GraphStats& g = model_.graph_stats();
    const std::string graphs =
        g.replays > 0 ? fmt::format("; forward replayed from a CUDA graph ({} nodes; {} captures, {} replays: the launch "
                                    "counts below are the graph's kernels, launched by one host call)",
                                    g.nodes, g.captures, g.replays)
                      : std::string("; forward launched op by op (no CUDA graph in this mode)");
    return fmt::format("cuda {}: weights {}, peak activations {}{}{}", cuda::h3::precision_name(model_.precision()),
                       gib(model_.weight_bytes()), gib(model_.peak_activation_bytes()), graphs, activity_.line());
  }
};

}  // namespace

std::unique_ptr<CudaGenerate> use_cuda(const Checkpoint& ckpt, pipeline::Magi2GenerateOptions& o, bool bf16) {
  auto run = std::make_unique<Magi2Run>(ckpt, bf16, o.load);
  Magi2Run* r = run.get();
  o.forward = [r](const models::magi2::PackedSequence& packed) { return r->model_.forward(packed); };
  o.run.backend = cuda::sampler_backend(r->dev_);
  r->activity_.wrap(o.run.progress);
  return run;
}

std::unique_ptr<CudaGenerate> use_cuda(const Checkpoint& ckpt, pipeline::H3GenerateOptions& o, bool bf16) {
  auto run = std::make_unique<H3Run>(ckpt, bf16);
  o.model = &run->model_;
  o.run.backend = cuda::sampler_backend(run->dev_);
  run->activity_.wrap(o.run.progress);
  return run;
}

#else  // no CUDA backend in this build

namespace {
[[noreturn]] void no_cuda() {
  throw BadInput(
      "--device cuda: this avdit was built without the CUDA backend (configure with -DAVDIT_CUDA=ON on a machine "
      "with the CUDA toolkit), or use --device cpu");
}
}  // namespace

void check_device(const std::string& device) {
  AVDIT_REQUIRE(device == "cpu" || device == "cuda", "--device {}: expected cpu or cuda", device);
  if (device == "cuda") no_cuda();
}
TensorMap forward_on_cuda(const Checkpoint&, const std::string&, const TensorMap&, bool, bool, bool) { no_cuda(); }
std::unique_ptr<CudaGenerate> use_cuda(const Checkpoint&, pipeline::Magi2GenerateOptions&, bool) { no_cuda(); }
std::unique_ptr<CudaGenerate> use_cuda(const Checkpoint&, pipeline::H3GenerateOptions&, bool) { no_cuda(); }

#endif

}  // namespace avdit::app
