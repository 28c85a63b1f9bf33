// The MAGI-2 preview transformer forward on the GPU, mirroring models/magi2/model.h (the CPU oracle): embedding
// and time overwrite, the layers (mHC around attention and dense MLP / MoE) and the final norms and linears,
// all on the device in the modality-sorted token order (attention's core in packed order). Two precisions:
// the fp32 parity mode, and the bf16 production mode that rounds exactly where the CPU's emulated bf16 mode
// (models/magi2/precision.h) rounds. Weights are uploaded once per Magi2CudaModel, which a sampler calls per step.
#pragma once

#include <cstdint>

#include "backend/cuda/models/magi2/weights.h"
#include "backend/cuda/moe/grouped.h"
#include "io/safetensors.h"
#include "models/magi2/packing.h"

namespace avdit::cuda::magi2 {

// What one forward enqueued (the launch-overhead figure): one count per kernel launch of this code and of the
// op-set calls it makes (rms_norm, swiglu7, add, attention each launch one kernel today), per cuBLAS GEMM call
// (cuBLAS may launch more than one kernel for one call, e.g. a split-K reduction), per memset, and per call
// into the MoE interface (route, routed_experts: their own launches are counted by that module, not here).
struct LaunchCounts {
  int64_t kernels = 0, gemms = 0, memsets = 0, moe_calls = 0;
  int64_t total() const { return kernels + gemms + memsets + moe_calls; }
};

struct CudaForwardOptions {
  // Record the intermediates under the golden fixture's names (as models/magi2 ForwardOptions::dump).
  bool dump = false;
  // Where the time embedding comes from. false (the default, as the CPU's forward_packed): packed.time_tokens
  // when it is defined (a sampler may have built it with its own frequency table), else computed on the GPU
  // from packed.per_token_t; true: always computed on the GPU from packed.per_token_t.
  bool device_time_embedding = false;
};

class Magi2CudaModel {
 public:
  // Uploads the weights (synchronous). bf16: the production mode; else the fp32 parity mode.
  Magi2CudaModel(Device& dev, const models::magi2::Magi2Weights& weights, bool bf16);

  // One forward: "model_output" [L, max(C_v, C_a)] F32 in packed order on the host (+ the dumps, F32 and
  // I64 router indices, per-token rows in packed order, as the CPU's forward_packed).
  TensorMap forward(const models::magi2::PackedSequence& packed, const CudaForwardOptions& options = {});

  // The same with model_output left on the device ([L, max(C_v, C_a)] F32, packed order); dumps, when
  // wanted, are device tensors in their compute dtype (router indices I32). Synchronises only around the
  // small uploads of the token layout at the start; temporaries go back to the stream-ordered pool unwaited.
  Tensor forward_device(const models::magi2::PackedSequence& packed, const CudaForwardOptions& options = {},
                        TensorMap* dumps = nullptr);

  bool bf16() const { return bf16_; }
  const models::magi2::Magi2Config& config() const { return w_.config; }
  int64_t weight_bytes() const { return w_.bytes; }
  // Largest sum of live device tensors this model allocated during the last forward (inputs, tables, the
  // residual stream, a layer's temporaries, dumps); not counted: the MoE module's and cuBLAS' internal buffers.
  int64_t peak_activation_bytes() const { return peak_bytes_; }
  const LaunchCounts& launches() const { return counts_; }

 private:
  struct Step;  // the per-forward state (layout indices, tables, trackers)
  void layer(Step& st, int64_t i, Tensor& s, TensorMap* dumps);

  // The layer's routed experts for the expert GEMMs: as uploaded, or NVFP4 ones dequantised into the
  // reused scratch (bf16, K-major; F32 copies in the fp32 mode).
  moe::ExpertWeights expert_weights(const DeviceLayer& lw);
  // Layer i's routed experts on `split`. Where the grouped Hopper GEMMs run (moe/grouped.h: bf16 mode,
  // sm_90, CUTLASS), on weights packed for them: bf16 experts packed once by the constructor, NVFP4
  // experts dequantised straight into the packed layout of a reused scratch per call. Otherwise
  // moe::routed_experts' Auto path on expert_weights().
  // into: as moe::combine's (the output written into the first columns of that tensor).
  Tensor routed_experts(int64_t i, const Tensor& split, const moe::Routing& routing, const moe::RouterConfig& rc,
                        Tensor* into = nullptr);

  Device& dev_;
  bool bf16_ = false;
  DeviceWeights w_;
  Tensor nvfp4_scratch_[3];  // gate, up, down dequantised (largest layer's size; reused by every layer)
  moe::GroupedWeights nvfp4_grouped_;  // the same for the grouped GEMMs (gate/up interleaved)
  std::vector<std::optional<moe::GroupedWeights>> grouped_;  // per layer, bf16 experts packed by the constructor
  LaunchCounts counts_;
  int64_t live_bytes_ = 0, peak_bytes_ = 0;
};

struct CudaForwardStats {
  int64_t weight_bytes = 0, peak_activation_bytes = 0;
  LaunchCounts launches;
};

// The GPU twin of models::magi2::forward_from_inputs (api.h): same inputs, same output names (video_velocity,
// audio_velocity, model_output; with dump the packed inputs and every intermediate), computed on `dev`
// (the time embedding too: device_time_embedding).
// bf16: the production precision; else fp32 parity. stats (optional) receives the figures `-v` prints.
TensorMap forward_from_inputs_cuda(Device& dev, const Checkpoint& ckpt, const TensorMap& inputs, bool dump,
                                   bool bf16, CudaForwardStats* stats = nullptr,
                                   const models::magi2::LoadOptions& load = {});

}  // namespace avdit::cuda::magi2
