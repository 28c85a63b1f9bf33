// mHC coefficients on the GPU (see mhc.h): the existing RMSNorm op, a row GEMM against phi ([in, out]) and
// the coefficient kernel.
#include "backend/cuda/models/magi2/mhc.h"

#include "backend/cuda/models/magi2/gemm.h"
#include "backend/cuda/ops_cuda.h"

namespace avdit::cuda::magi2 {

DeviceMhcCoefficients mhc_coefficients(Device& dev, const Tensor& s, const Tensor& norm_weight, const Tensor* group,
                                       const DeviceMhcBranch& branch, int64_t n, bool round_bf16) {
  require_cuda(s, "mhc state");
  AVDIT_REQUIRE(s.ndim() == 2, "mhc: state {} (expected [L, n*hidden])", s.shape_str());
  const int64_t L = s.size(0);
  DeviceMhcCoefficients c;
  c.normed = rms_norm(dev, s, norm_weight, 1e-6f, true, group, DType::F32);
  c.logits = cuda_empty(dev, {L, 2 * n + n * n}, DType::F32);
  gemm_rows(dev, c.normed, branch.phi, /*w_kn=*/true, c.logits, 0, L);
  c.h_pre = cuda_empty(dev, {L, n}, DType::F32);
  c.h_post = cuda_empty(dev, {L, n}, DType::F32);
  c.h_res = cuda_empty(dev, {L, n, n}, DType::F32);
  mhc_coefficients_epilogue(dev, c.logits, branch.scalars, branch.bias_pre, branch.bias_post, branch.bias_res, n,
                            round_bf16, c.h_pre, c.h_post, c.h_res);
  return c;
}

}  // namespace avdit::cuda::magi2
