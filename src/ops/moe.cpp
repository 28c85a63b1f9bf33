// Weight preparation of the MoE ops (see ops/moe.h): the CPU keeps the checkpoint's tensors, the
// CUDA context uploads or packs them.
#include "ops/moe.h"

#include "core/error.h"

namespace avdit::ops {

ExpertWeights prepare_experts(Context& ctx, ExpertWeights w, const MoeConfig& cfg, DType act) {
  const size_t parts = w.nvfp4() ? w.gate_q.size() : w.gate.size();
  AVDIT_CHECK(parts == 1 || parts == static_cast<size_t>(cfg.heads),
              "moe experts: {} parts for {} heads", parts, cfg.heads);
  AVDIT_CHECK(0 <= w.begin && w.begin < w.end && w.end <= cfg.experts,
              "moe experts: range [{}, {}) of {}", w.begin, w.end, cfg.experts);
#if AVDIT_HAVE_CUDA
  if (ctx.is_cuda()) return cuda::prepare_experts(ctx.cuda(), std::move(w), cfg, act);
#endif
  require_cpu_build(ctx, "prepare_experts");
  (void)act;
  w.bytes = 0;
  return w;
}

MoeOutputWeights prepare_moe_output(Context& ctx, const Tensor& merge, const Tensor& shared_fc2,
                                    DType act) {
  AVDIT_CHECK(merge.ndim() == 2 && shared_fc2.ndim() == 2 && merge.size(0) == shared_fc2.size(0),
              "moe output: merge {} and shared_fc2 {} do not share their rows", merge.shape_str(),
              shared_fc2.shape_str());
#if AVDIT_HAVE_CUDA
  if (ctx.is_cuda()) return cuda::prepare_moe_output(ctx.cuda(), merge, shared_fc2, act);
#endif
  require_cpu_build(ctx, "prepare_moe_output");
  (void)act;
  MoeOutputWeights w;
  w.merge = merge;
  w.shared_fc2 = shared_fc2;
  w.width = merge.size(1);
  return w;
}

}  // namespace avdit::ops
