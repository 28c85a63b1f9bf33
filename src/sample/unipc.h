// FlowUniPCMultistep solver (UniPC, B(h) = bh2, order 2, x0 prediction, lower_order_final) of the
// MAGI-2 reference, one stateful instance per modality; float32 like the reference.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "sample/elementwise.h"

namespace avdit::sample {

// With sigmas σ_0 > ... > σ_N = 0, α = 1 - σ, λ = ln α - ln σ and m_i = x_i - σ_i v_i:
//  * corrector (i >= 1, order p_{i-1}) refines x_i from x̃_{i-1}, m_{i-1}, m_{i-2} and m_i;
//  * predictor (order p_i = min(2, N - i, i + 1)) gives x_{i+1} from x̃_i, m_i, m_{i-1}.
// The full formulas are in ../shared/golden/magi2-tiny/README.md ("Sampler"). Scalar coefficients are
// computed in float32 with the reference's operation order (its sigmas live on the CPU); element-wise
// work is one rounding per torch op, so the code must not be compiled with FMA contraction of these
// loops (x86-64 without -march=... never contracts).
// The scalar side of FlowUniPC: the step counter, the order schedule (warm-up, lower_order_final)
// and every coefficient, computed on the host in float32 with the reference's operation order. Each
// next() describes one step's element-wise work (elementwise.h), which the CPU solver below and the
// CUDA solver both apply.
class UniPCPlanner {
 public:
  // sigmas: N + 1 values, decreasing, the last one 0 (FlowUniPCSchedule::sigmas).
  explicit UniPCPlanner(std::vector<float> sigmas);
  // The plan of the next step; advances the counter. BadInput once all steps are taken.
  elem::UniPCStepPlan next();
  int step_index() const { return step_index_; }  // steps planned so far
  int num_steps() const { return static_cast<int>(sigmas_.size()) - 1; }
  const std::vector<float>& sigmas() const { return sigmas_; }
  void reset();

 private:
  float lambda(int i) const;
  elem::UniPCUpdate corrector(int order) const;
  elem::UniPCUpdate predictor(int order) const;

  std::vector<float> sigmas_;
  int step_index_ = 0;
  int lower_order_nums_ = 0;
  int this_order_ = 0;  // order chosen at the previous step (used by its corrector)
};

class FlowUniPC {
 public:
  // sigmas: N + 1 values, decreasing, the last one 0 (FlowUniPCSchedule::sigmas).
  explicit FlowUniPC(std::vector<float> sigmas) : plan_(std::move(sigmas)) {}

  // One scheduler.step: `velocity` is the (guided) model output at the current sample x_i; `sample`
  // holds x_i on entry and x_{i+1} on return. The same element count at every call.
  void step(std::span<const float> velocity, std::span<float> sample);
  // Same on float32 tensors of equal shape; returns x_{i+1} as a new tensor.
  Tensor step(const Tensor& velocity, const Tensor& sample);

  int step_index() const { return plan_.step_index(); }  // steps taken so far
  int num_steps() const { return plan_.num_steps(); }
  const std::vector<float>& sigmas() const { return plan_.sigmas(); }
  // Forget the history (as set_timesteps does); the next step is step 0 again.
  void reset();

 private:
  UniPCPlanner plan_;
  // Per element: the last corrected sample (x̃_{i-1}) and the last two x0 predictions
  // (model_outputs[-1], model_outputs[-2]).
  std::vector<float> last_sample_, m_last_, m_prev_;
};

}  // namespace avdit::sample
