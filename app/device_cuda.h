// --device cuda for `avdit forward` and `avdit generate`: the GPU models behind the same inputs and
// outputs as the CPU path. In a build without the CUDA backend, asking for it is a BadInput that
// says how to get it.
#pragma once

#include <memory>
#include <string>

#include "io/safetensors.h"
#include "pipeline/generate_h3.h"
#include "pipeline/generate_magi2.h"

namespace avdit::app {

// Throws BadInput unless `device` is "cpu", or "cuda" in a CUDA build.
void check_device(const std::string& device);

// One forward of either family on the GPU (bf16: the production precision; else fp32 parity).
// nvfp4_experts: MAGI-2's routed experts packed at load time and kept packed on the GPU.
TensorMap forward_on_cuda(const Checkpoint& ckpt, const std::string& family, const TensorMap& inputs, bool dump,
                          bool bf16, bool nvfp4_experts = false);

// A GPU generate run: owns the device, the uploaded model and the device sampler that it plugs into
// the pipeline options. summary() gives the figures `generate -v` prints.
class CudaGenerate {
 public:
  virtual ~CudaGenerate() = default;
  virtual std::string summary() const = 0;
};
// MAGI-2 loads its weights with options.load (e.g. nvfp4_experts).
std::unique_ptr<CudaGenerate> use_cuda(const Checkpoint& ckpt, pipeline::Magi2GenerateOptions& options, bool bf16);
std::unique_ptr<CudaGenerate> use_cuda(const Checkpoint& ckpt, pipeline::H3GenerateOptions& options, bool bf16);

}  // namespace avdit::app
