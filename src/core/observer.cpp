// Observer bookkeeping (see observer.h).
#include "core/observer.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace avdit {

std::string Point::str() const {
  const char* brace = std::strstr(name, "{}");
  if (!brace || index < 0) return name;
  return std::string(name, brace) + std::to_string(index) + (brace + 2);
}

bool Point::is(const char* pattern) const { return std::strcmp(name, pattern) == 0; }

void Observer::attach(Probe* probe) {
  if (std::find(probes_.begin(), probes_.end(), probe) == probes_.end()) probes_.push_back(probe);
  ++version_;
}

void Observer::detach(Probe* probe) {
  probes_.erase(std::remove(probes_.begin(), probes_.end(), probe), probes_.end());
  ++version_;
}

bool Observer::wants(const Point& p) const {
  for (const Probe* probe : probes_)
    if (probe->wants(p)) return true;
  return false;
}

void Observer::emit(ops::Context& ctx, const Point& p, Tensor& t) {
  ++emits_;
  for (Probe* probe : probes_)
    if (probe->wants(p)) probe->on(ctx, p, t);
}

}  // namespace avdit
