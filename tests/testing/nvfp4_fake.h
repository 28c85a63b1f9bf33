// Shared test helper: the fake-quantised twin of a MAGI-2 checkpoint (each routed expert stack
// replaced by the bf16 values of quantise -> dequantise, every other tensor copied), which the
// packed NVFP4 path must match bit for bit on the CPU (tests/unit/nvfp4_moe_test.cpp) and on the
// GPU (tests/gpu/nvfp4_moe_cuda_test.cpp).
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "quant/nvfp4.h"
#include "quant/nvfp4_checkpoint.h"

namespace avdit::test_util {

// Writes dst (a new folder): config.json and model.safetensors with the routed experts
// fake-quantised.
inline void write_fake_quantised(const std::filesystem::path& src,
                                 const std::filesystem::path& dst) {
  const Checkpoint ckpt = Checkpoint::open(src);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : ckpt.names()) {
    const Tensor t = ckpt.get(name);
    tensors.emplace_back(name,
                         quant::is_routed_expert_tensor(name) ? quant::fake_quantize_nvfp4(t) : t);
  }
  std::filesystem::create_directories(dst);
  write_safetensors(dst / "model.safetensors", tensors);
  std::filesystem::copy_file(ckpt.dir() / "config.json", dst / "config.json");
}

}  // namespace avdit::test_util
