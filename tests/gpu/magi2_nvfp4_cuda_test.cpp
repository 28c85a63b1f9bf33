// NVFP4 experts resident on the GPU: the magi2-tiny forward with its routed experts packed at load
// time (4.5 bits per weight on the device, dequantised to bf16 in front of the expert GEMMs) must
// match the CPU forward on the same packed weights (which dequantises the same bf16 values), in the
// fp32 mode within the GPU-vs-CPU parity bound of the plain model, and hold fewer weight bytes.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/cuda/models/magi2/model.h"
#include "io/safetensors.h"
#include "models/magi2/api.h"
#include "testing/compare.h"

namespace avdit::cuda::magi2 {
namespace {

using avdit::test_util::rel_max_diff;

const std::string kDir = std::string(AVDIT_SHARED_DIR) + "/golden/magi2-tiny";

TEST(Magi2Nvfp4Cuda, PackedExpertsMatchCpuAndShrinkWeights) {
  const Checkpoint ckpt = Checkpoint::open(kDir);
  const TensorMap inputs = read_all(kDir + "/inputs.safetensors");
  models::magi2::LoadOptions packed;
  packed.nvfp4_experts = true;
  const TensorMap cpu = models::magi2::forward_from_inputs(ckpt, inputs, false, false, packed);
  const TensorMap cpu_plain = models::magi2::forward_from_inputs(ckpt, inputs, false, false);
  Device dev;
  CudaForwardStats s_packed, s_plain;
  const TensorMap gpu = forward_from_inputs_cuda(dev, ckpt, inputs, false, false, &s_packed, packed);
  const TensorMap gpu_plain = forward_from_inputs_cuda(dev, ckpt, inputs, false, false, &s_plain);
  const double err = rel_max_diff(gpu.at("model_output"), cpu.at("model_output"), "nvfp4 gpu vs cpu (fp32)");
  const double err_plain =
      rel_max_diff(gpu_plain.at("model_output"), cpu_plain.at("model_output"), "plain gpu vs cpu (fp32)");
  const double quant = rel_max_diff(cpu.at("model_output"), cpu_plain.at("model_output"), "nvfp4 vs bf16 experts");
  std::printf("fp32: nvfp4 GPU vs CPU %.3e (plain experts %.3e); NVFP4 vs plain experts %.3e; weights %lld -> %lld B\n",
              err, err_plain, quant, static_cast<long long>(s_plain.weight_bytes),
              static_cast<long long>(s_packed.weight_bytes));
  EXPECT_LE(err, 1e-4);
  EXPECT_GT(quant, 1e-3);  // the packed path really ran (NVFP4 moves the output by ~7% RMS)
  EXPECT_LT(s_packed.weight_bytes, s_plain.weight_bytes);

  // bf16 production mode: reported, and held near the CPU's bf16 emulation on the same packed weights.
  const TensorMap cpu16 = models::magi2::forward_from_inputs(ckpt, inputs, false, true, packed);
  const TensorMap gpu16 = forward_from_inputs_cuda(dev, ckpt, inputs, false, true, nullptr, packed);
  const double err16 = rel_max_diff(gpu16.at("model_output"), cpu16.at("model_output"), "nvfp4 gpu vs cpu (bf16)");
  std::printf("bf16: nvfp4 GPU vs CPU bf16 emulation %.3e\n", err16);
  EXPECT_LE(err16, 0.25);
}

}  // namespace
}  // namespace avdit::cuda::magi2
