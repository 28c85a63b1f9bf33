// The MAGI-2 dump probe (see dump.h).
#include "models/magi2/dump.h"

#include <cstring>

#include "ops/context.h"

namespace avdit::models::magi2 {

bool DumpProbe::wants(const Point& p) const {
  return p.is("embed_pre_time") || p.is("embed") || p.is("rope") ||
         std::strncmp(p.name, "layers.{}.", 10) == 0;
}

void DumpProbe::on(ops::Context& ctx, const Point& p, Tensor& t) {
  const Tensor h = ctx.download(t);
  out_[p.str()] = h.dtype() == DType::I32 ? h.to(DType::I64) : h.to_f32().clone();
}

}  // namespace avdit::models::magi2
