// NVFP4 experts resident on the GPU: the magi2-tiny forward with its routed experts packed at load
// time (4.5 bits per weight on the device, dequantised to bf16 in front of the expert kernels) must
// match the CPU forward on the same packed weights (which dequantises the same bf16 values), in the
// fp32 mode within the GPU-vs-CPU parity bound of the plain model, and hold fewer weight bytes.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/cuda/context.h"
#include "io/safetensors.h"
#include "models/magi2/api.h"
#include "testing/compare.h"

namespace avdit::models::magi2 {
namespace {

using avdit::test_util::rel_max_diff;

const std::string kDir = std::string(AVDIT_SHARED_DIR) + "/golden/magi2-tiny";

struct ForwardRun {
  TensorMap out;
  int64_t weight_bytes = 0;
};

ForwardRun forward(ops::Context& ctx, const Checkpoint& ckpt, const TensorMap& inputs, DType act,
                   const LoadOptions& load) {
  const Magi2Model model(ctx, ckpt, act, load);
  return ForwardRun{forward_from_inputs(model, inputs, false), model.weight_bytes()};
}

TEST(Magi2Nvfp4Cuda, PackedExpertsMatchCpuAndShrinkWeights) {
  const Checkpoint ckpt = Checkpoint::open(kDir);
  const TensorMap inputs = read_all(kDir + "/inputs.safetensors");
  LoadOptions packed;
  packed.nvfp4_experts = true;
  ops::CpuContext cpu;
  ops::CudaContext gpu;
  const TensorMap cpu_packed = forward(cpu, ckpt, inputs, DType::F32, packed).out;
  const TensorMap cpu_plain = forward(cpu, ckpt, inputs, DType::F32, {}).out;
  const ForwardRun gpu_packed = forward(gpu, ckpt, inputs, DType::F32, packed);
  const ForwardRun gpu_plain = forward(gpu, ckpt, inputs, DType::F32, {});
  const double err = rel_max_diff(gpu_packed.out.at("model_output"), cpu_packed.at("model_output"),
                                  "nvfp4 gpu vs cpu (fp32)");
  const double err_plain = rel_max_diff(gpu_plain.out.at("model_output"),
                                        cpu_plain.at("model_output"), "plain gpu vs cpu (fp32)");
  const double quant = rel_max_diff(cpu_packed.at("model_output"), cpu_plain.at("model_output"),
                                    "nvfp4 vs bf16 experts");
  std::printf(
      "fp32: nvfp4 GPU vs CPU %.3e (plain experts %.3e); NVFP4 vs plain experts %.3e; weights %lld "
      "-> %lld B\n",
      err, err_plain, quant, static_cast<long long>(gpu_plain.weight_bytes),
      static_cast<long long>(gpu_packed.weight_bytes));
  EXPECT_LE(err, 1e-4);
  EXPECT_GT(quant, 1e-3);  // the packed path really ran (NVFP4 moves the output by ~7% RMS)
  EXPECT_LT(gpu_packed.weight_bytes, gpu_plain.weight_bytes);

  // bf16 production mode: reported, and held near the CPU's bf16 emulation on the same packed
  // weights.
  const TensorMap cpu16 = forward(cpu, ckpt, inputs, DType::BF16, packed).out;
  const TensorMap gpu16 = forward(gpu, ckpt, inputs, DType::BF16, packed).out;
  const double err16 =
      rel_max_diff(gpu16.at("model_output"), cpu16.at("model_output"), "nvfp4 gpu vs cpu (bf16)");
  std::printf("bf16: nvfp4 GPU vs CPU bf16 emulation %.3e\n", err16);
  EXPECT_LE(err16, 0.25);
}

}  // namespace
}  // namespace avdit::models::magi2
