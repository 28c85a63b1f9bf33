#include "device_cuda.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"

#if AVDIT_HAVE_CUDA
#include "backend/cuda/models/h3/model_cuda.h"
#include "backend/cuda/models/magi2/model.h"
#include "backend/cuda/sample_cuda.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "models/magi2/api.h"
#include "models/magi2/weights.h"
#endif

namespace avdit::app {

namespace {
std::string gib(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1u << 30)); }
}  // namespace

#if AVDIT_HAVE_CUDA

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

class Magi2Run final : public CudaGenerate {
 public:
  Magi2Run(const Checkpoint& ckpt, bool bf16, const models::magi2::LoadOptions& load)
      : weights_(models::magi2::load_magi2_weights(ckpt, models::magi2::config_from_checkpoint(ckpt), load)),
        model_(dev_, weights_, bf16) {}
  cuda::Device dev_;
  models::magi2::Magi2Weights weights_;
  cuda::magi2::Magi2CudaModel model_;
  std::string summary() const override {
    return fmt::format("cuda {}: weights {}, peak activations {}, {} launches per forward",
                       model_.bf16() ? "bf16" : "fp32", gib(model_.weight_bytes()),
                       gib(model_.peak_activation_bytes()), model_.launches().total());
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
  std::string summary() const override {
    return fmt::format("cuda {}: weights {}, peak activations {}", cuda::h3::precision_name(model_.precision()),
                       gib(model_.weight_bytes()), gib(model_.peak_activation_bytes()));
  }
};

}  // namespace

std::unique_ptr<CudaGenerate> use_cuda(const Checkpoint& ckpt, pipeline::Magi2GenerateOptions& o, bool bf16) {
  auto run = std::make_unique<Magi2Run>(ckpt, bf16, o.load);
  Magi2Run* r = run.get();
  o.forward = [r](const models::magi2::PackedSequence& packed) { return r->model_.forward(packed); };
  o.run.backend = cuda::sampler_backend(r->dev_);
  return run;
}

std::unique_ptr<CudaGenerate> use_cuda(const Checkpoint& ckpt, pipeline::H3GenerateOptions& o, bool bf16) {
  auto run = std::make_unique<H3Run>(ckpt, bf16);
  o.model = &run->model_;
  o.run.backend = cuda::sampler_backend(run->dev_);
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
