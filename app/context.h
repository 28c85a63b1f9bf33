// --device for the commands: the execution context the models run on (the CPU oracle, or the CUDA
// backend when this build has it), and what a GPU run reports after its steps (CUPTI launch counts
// and the GPU's busy share).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ops/context.h"

namespace avdit::app {

// The context of --device cpu|cuda; BadInput for other names, or for cuda in a build without it.
std::unique_ptr<ops::Context> make_context(const std::string& device);

// --precision fp32|bf16 as the activation dtype.
DType activation_dtype(const std::string& precision);

// --attention-plan for the benchmarks of whole forwards and steps: "default" (Split, or the timed
// choice where timing is on), or split | ragged | own for every attention call of the run
// (ops/attention.h's SegmentPlan). BadInput for other names, and for a non-default plan on the CPU.
void set_attention_plan(ops::Context& ctx, const std::string& plan);

// The launch-overhead figures of steps 2..N on a CUDA context: wraps the progress callback, and
// line() says what the GPU executed per step. Empty on the CPU.
class StepActivity {
 public:
  virtual ~StepActivity() = default;
  virtual void wrap(std::function<void(int, int, double)>& progress) = 0;
  virtual std::string line() const = 0;
};
std::unique_ptr<StepActivity> step_activity(ops::Context& ctx);

// "weights X GiB" and the peak device memory of the run so far ("" on the CPU).
std::string memory_summary(ops::Context& ctx, int64_t weight_bytes);

}  // namespace avdit::app
