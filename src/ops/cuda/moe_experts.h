// The CUDA backend's form of a MoE layer's routed experts (ops::ExpertWeights::device), made once
// by ops::prepare_experts: bf16 experts packed for the Hopper kernels where they run; otherwise
// every head's stacks in the activation dtype for the SIMT kernels (the fp32 parity path); NVFP4
// experts kept packed (4.5 bits per weight) and dequantised per call in front of the expert
// kernels.
#pragma once

#include <optional>

#include "core/tensor.h"
#include "ops/cuda/moe/grouped.h"
#include "ops/cuda/moe/moe.h"

namespace avdit::ops::cuda {

struct ExpertStore {
  DType act = DType::F32;
  ::avdit::cuda::moe::ExpertWeights plain;  // SIMT: [H E, D, De] x2, [H E, De, D]
  std::optional<::avdit::cuda::moe::GroupedWeights>
      grouped;  // Hopper: gate/up interleaved, K-major
  // NVFP4 (quant/nvfp4.h layout, every head's experts stacked): values U8 [H E, N, K/2], block
  // scales F8_E4M3 [H E, N, K/16], global scales F32 [H E]; gate, up, down.
  struct Packed {
    Tensor values, block_scales, global_scales;
  };
  std::optional<Packed> nvfp4[3];
};

}  // namespace avdit::ops::cuda
