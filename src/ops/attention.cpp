// Segment planning (see ops/attention.h): validated on the host, then made on the context.
#include "ops/attention.h"

#include "core/error.h"

namespace avdit::ops {

Segments plan_segments(Context& ctx, std::vector<int64_t> cu, int64_t heads, int64_t head_dim,
                       DType dtype) {
  AVDIT_REQUIRE(cu.size() >= 2 && cu.front() == 0,
                "attention segments must start at 0 with >= 2 entries");
  for (size_t i = 1; i < cu.size(); ++i)
    AVDIT_REQUIRE(cu[i] >= cu[i - 1], "attention segments decrease at entry {} ({} < {})", i, cu[i],
                  cu[i - 1]);
#if AVDIT_HAVE_CUDA
  if (ctx.is_cuda()) return cuda::plan_segments(ctx.cuda(), std::move(cu), heads, head_dim, dtype);
#endif
  require_cpu_build(ctx, "plan_segments");
  (void)heads, (void)head_dim, (void)dtype;
  Segments s;
  s.cu = std::move(cu);
  return s;
}

}  // namespace avdit::ops
