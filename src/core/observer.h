// Named points of a forward and of the sampler loop, and the probes that attach to them (dumps,
// router statistics, range monitors, profiling, trajectories, teacher forcing). A point with no
// probe attached costs one branch: the tensor it would show is not even computed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

#ifndef AVDIT_OBSERVER
#define AVDIT_OBSERVER 1  // 0 compiles every point out (the build that measures what they cost)
#endif

namespace avdit {
namespace ops {
class Context;
}

// `name` is a pattern with at most one "{}" that `index` fills ("layers.{}.attn_in", 3 ->
// "layers.3.attn_in"); index -1: a point without an index ("embed", "step.latents").
struct Point {
  const char* name = "";
  int64_t index = -1;
  int64_t part = -1;  // which of several tensors of one point (the sampler's modality), -1: one
  std::string str() const;
  bool is(const char* pattern) const;  // the same pattern (any index)
};

class Probe {
 public:
  virtual ~Probe() = default;
  // Called only while the probe is attached, before the tensor is computed: keep it cheap.
  virtual bool wants(const Point& p) const = 0;
  // The tensor at the point (on ctx's device). At a mutable point (observe_mut) a probe may
  // replace it: teacher forcing substitutes the teacher's latents.
  virtual void on(ops::Context& ctx, const Point& p, Tensor& t) = 0;
};

class Observer {
 public:
  void attach(Probe* probe);
  void detach(Probe* probe);
  bool empty() const { return probes_.empty(); }
  bool wants(const Point& p) const;
  void emit(ops::Context& ctx, const Point& p, Tensor& t);
  // Counters a replayed CUDA graph needs: `version` changes on every attach and detach, `emits`
  // counts the points handed to probes (a body that emits none may be captured and replayed).
  uint64_t version() const { return version_; }
  uint64_t emits() const { return emits_; }

 private:
  std::vector<Probe*> probes_;
  uint64_t version_ = 0;
  uint64_t emits_ = 0;
};

// Attaches a probe for the lifetime of this object.
class ProbeScope {
 public:
  ProbeScope(Observer& obs, Probe* probe) : obs_(obs), probe_(probe) {
    if (probe_) obs_.attach(probe_);
  }
  ~ProbeScope() {
    if (probe_) obs_.detach(probe_);
  }
  ProbeScope(const ProbeScope&) = delete;
  ProbeScope& operator=(const ProbeScope&) = delete;

 private:
  Observer& obs_;
  Probe* probe_;
};

}  // namespace avdit
