// Device solvers and CFG, the tensor side: checks, the host-side UniPC planner, history buffers;
// the kernels are in sample_kernels.cu.
#include "backend/cuda/sample_cuda.h"

#include <algorithm>

#include "backend/cuda/sample_kernels.h"
#include "sample/unipc.h"

namespace avdit::cuda {
namespace {

void require_f32_on_device(const Tensor& t, const char* what) {
  require_cuda(t, what);
  AVDIT_REQUIRE(t.dtype() == DType::F32, "{}: expected F32 on the device, got {}", what, dtype_name(t.dtype()));
}

class UniPCStepperCuda final : public sample::Stepper {
 public:
  UniPCStepperCuda(Device& dev, std::vector<float> sigmas) : dev_(dev), plan_(std::move(sigmas)) {}
  Tensor step(const sample::StepInfo& s, const Tensor& velocity, const Tensor& latent) override {
    AVDIT_CHECK(s.index == plan_.step_index(), "UniPC stepper at step {} was asked for step {}", plan_.step_index(),
                s.index);
    require_f32_on_device(velocity, "UniPC velocity");
    require_f32_on_device(latent, "UniPC latent");
    AVDIT_REQUIRE(velocity.shape() == latent.shape(), "UniPC: velocity shape {} differs from sample shape {}",
                  velocity.shape_str(), latent.shape_str());
    const int64_t n = latent.numel();
    if (s.index == 0 || history_.numel() != 3 * n) {
      AVDIT_REQUIRE(s.index == 0, "UniPC: the sample has {} elements but had {} at the previous step", n,
                    history_.numel() / 3);
      history_ = cuda_empty(dev_, {3, n}, DType::F32);
      AVDIT_CUDA_CHECK(cudaMemsetAsync(device_ptr(history_), 0, 3 * n * sizeof(float), dev_.stream()));
    }
    const sample::elem::UniPCStepPlan p = plan_.next();
    Tensor out = cuda_empty(dev_, latent.shape(), DType::F32);
    float* h = static_cast<float*>(device_ptr(history_));
    launch_unipc_step(dev_.stream(), p, static_cast<const float*>(velocity.raw()),
                      static_cast<const float*>(latent.raw()), static_cast<float*>(device_ptr(out)), h, n);
    AVDIT_CUDA_CHECK_LAUNCH();
    return out;
  }

 private:
  Device& dev_;
  sample::UniPCPlanner plan_;
  Tensor history_;  // [3, n]: last corrected sample, m_last, m_prev
};

class H3EulerStepperCuda final : public sample::Stepper {
 public:
  H3EulerStepperCuda(Device& dev, std::vector<float> t, std::vector<float> ratio)
      : dev_(dev), t_(std::move(t)), ratio_(std::move(ratio)) {
    AVDIT_REQUIRE(t_.size() == ratio_.size(), "H3 Euler: {} timesteps but {} sigma ratios; expected equal", t_.size(),
                  ratio_.size());
  }
  Tensor step(const sample::StepInfo& s, const Tensor& velocity, const Tensor& latent) override {
    AVDIT_REQUIRE(s.index >= 0 && static_cast<size_t>(s.index) < t_.size(),
                  "H3 Euler: step {} is outside the schedule of {} steps", s.index, t_.size());
    require_f32_on_device(velocity, "H3 Euler velocity");
    require_f32_on_device(latent, "H3 Euler latent");
    AVDIT_REQUIRE(velocity.shape() == latent.shape(), "H3 Euler step: velocity shape {} differs from latent shape {}",
                  velocity.shape_str(), latent.shape_str());
    const int64_t n = latent.numel();
    Tensor out = cuda_empty(dev_, latent.shape(), DType::F32);
    const float t = t_[s.index], r = ratio_[s.index];
    // The scalars exactly as the CPU solver forms them (sample/euler.cpp).
    const float c = 1.0f - t, one_minus_r = 1.0f - r;
    launch_h3_euler(dev_.stream(), static_cast<const float*>(latent.raw()), static_cast<const float*>(velocity.raw()),
                    static_cast<float*>(device_ptr(out)), c, r, one_minus_r, n);
    AVDIT_CUDA_CHECK_LAUNCH();
    return out;
  }

 private:
  Device& dev_;
  std::vector<float> t_, ratio_;
};

}  // namespace

std::unique_ptr<sample::Stepper> make_unipc_stepper(Device& dev, std::vector<float> sigmas) {
  return std::make_unique<UniPCStepperCuda>(dev, std::move(sigmas));
}

std::unique_ptr<sample::Stepper> make_h3_euler_stepper(Device& dev, std::vector<float> t, std::vector<float> ratio) {
  return std::make_unique<H3EulerStepperCuda>(dev, std::move(t), std::move(ratio));
}

Tensor cfg_combine(Device& dev, const Tensor& cond, const Tensor& uncond, const std::vector<float>& scales,
                   int64_t inner) {
  require_f32_on_device(cond, "CFG cond");
  require_f32_on_device(uncond, "CFG uncond");
  AVDIT_REQUIRE(cond.shape() == uncond.shape(), "CFG: cond shape {} differs from uncond shape {}", cond.shape_str(),
                uncond.shape_str());
  AVDIT_REQUIRE(!scales.empty() && scales.size() <= static_cast<size_t>(kMaxCfgScales) && inner >= 1,
                "CFG: {} scales (expected 1 to {}), inner {}", scales.size(), kMaxCfgScales, inner);
  const int64_t n = cond.numel();
  Tensor out = cuda_empty(dev, cond.shape(), DType::F32);
  launch_cfg(dev.stream(), static_cast<const float*>(cond.raw()), static_cast<const float*>(uncond.raw()),
             static_cast<float*>(device_ptr(out)), scales.data(), static_cast<int>(scales.size()), inner, n);
  AVDIT_CUDA_CHECK_LAUNCH();
  return out;
}

Tensor to_host_f32(Device& dev, const Tensor& t) {
  if (!t.defined() || t.device() == avdit::Device::CPU) return t;
  return to_host(dev, t).to_f32();
}

pipeline::SamplerBackend sampler_backend(Device& dev) {
  pipeline::SamplerBackend b;
  Device* d = &dev;
  b.unipc = [d](std::vector<float> sigmas) { return make_unipc_stepper(*d, std::move(sigmas)); };
  b.h3_euler = [d](std::vector<float> t, std::vector<float> r) {
    return make_h3_euler_stepper(*d, std::move(t), std::move(r));
  };
  b.cfg = [d](const Tensor& c, const Tensor& u, const std::vector<float>& scales, int64_t inner) {
    return cfg_combine(*d, c, u, scales, inner);
  };
  b.to_host = [d](const Tensor& t) { return to_host_f32(*d, t); };
  b.to_device = [d](const Tensor& t) {
    if (!t.defined() || t.device() == avdit::Device::CUDA) return t;
    return to_device(*d, t.to_f32());
  };
  return b;
}

}  // namespace avdit::cuda
