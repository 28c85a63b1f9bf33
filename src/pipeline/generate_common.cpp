// Initial latents (given or seeded noise) with shape checks shared by the generate pipelines.
#include "pipeline/generate_common.h"

#include <algorithm>

#include "core/error.h"
#include "sample/noise.h"

namespace avdit::pipeline {

bool shape_matches(const Shape& shape, const Shape& pattern) {
  if (shape.size() != pattern.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i)
    if (pattern[i] >= 0 && shape[i] != pattern[i]) return false;
  return true;
}

std::string pattern_str(const Shape& pattern) {
  static const char* kFree[] = {"d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7"};
  std::string s = "[";
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (i) s += ", ";
    s += pattern[i] >= 0 ? std::to_string(pattern[i]) : kFree[std::min<size_t>(i, 7)];
  }
  return s + "]";
}

Tensor initial_latent(const LabeledTensor& given, const Shape& shape, const Shape& expected, uint64_t seed,
                      uint64_t stream, const std::string& what) {
  if (given.defined()) {
    const Tensor& t = given.tensor;
    AVDIT_REQUIRE(dtype_is_float(t.dtype()), "{}: {} noise must be a float tensor, found {}", given.where, what,
                  dtype_name(t.dtype()));
    AVDIT_REQUIRE(shape_matches(t.shape(), expected), "{} ({} noise) has shape {}, expected {} for this model",
                  given.where, what, t.shape_str(), pattern_str(expected));
    for (int64_t v : t.shape())
      AVDIT_REQUIRE(v > 0, "{}: {} noise has an empty dimension (shape {})", given.where, what, t.shape_str());
    return t.to(DType::F32);  // an owned copy: the sampler writes new tensors, never into the file
  }
  AVDIT_REQUIRE(!shape.empty(), "no {} noise given and no latent shape: pass --noise FILE, --latent-shape or "
                "--frames/--height/--width", what);
  AVDIT_REQUIRE(shape_matches(shape, expected), "{} latent shape {} does not fit this model (expected {})", what,
                shape_str(shape), pattern_str(expected));
  for (int64_t v : shape) AVDIT_REQUIRE(v > 0, "{} latent shape {} has an empty dimension", what, shape_str(shape));
  return sample::make_noise(shape, seed, stream);
}

RunProbes::RunProbes(ops::Context& ctx, const RunOptions& run, GenerateResult& result, sample::SamplerOptions& so,
                     const std::vector<Tensor>& initial, int steps)
    : guard_(so.modalities), guard_scope_(ctx.observer(), &guard_) {
  if (run.record_trajectory) {
    recorder_.emplace(result.trajectory, so.modalities, run.record_model_out);
    record_scope_.emplace(ctx.observer(), &*recorder_);
  }
  if (run.teacher) {
    teacher_.emplace(*run.teacher);
    teacher_->check(steps, initial, so.modalities);
    teacher_scope_.emplace(ctx.observer(), &*teacher_);
  }
  so.progress = [&result, progress = run.progress](int done, int total, double seconds) {
    result.step_seconds.push_back(seconds);
    if (progress) progress(done, total, seconds);
  };
}

}  // namespace avdit::pipeline
