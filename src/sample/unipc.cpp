// FlowUniPCMultistep (bh2, order 2, predict x0) with the reference's float32 operation order.
// Each element-wise line mirrors one torch expression; the comments name it.
#include "sample/unipc.h"

#include <cmath>

#include "core/error.h"

namespace avdit::sample {

FlowUniPC::FlowUniPC(std::vector<float> sigmas) : sigmas_(std::move(sigmas)) {
  AVDIT_REQUIRE(sigmas_.size() >= 2, "UniPC: expected at least 2 sigmas (1 step), got {}",
                sigmas_.size());
  for (size_t i = 0; i + 1 < sigmas_.size(); ++i)
    AVDIT_REQUIRE(sigmas_[i] > sigmas_[i + 1] && sigmas_[i] <= 1.0f,
                  "UniPC: expected strictly decreasing sigmas in (0, 1], got sigma[{}] = {} then {}", i,
                  sigmas_[i], sigmas_[i + 1]);
  AVDIT_REQUIRE(sigmas_.back() >= 0.0f, "UniPC: expected a final sigma >= 0, got {}", sigmas_.back());
}

void FlowUniPC::reset() {
  step_index_ = 0;
  lower_order_nums_ = 0;
  this_order_ = 0;
  m_prev_.clear();
  m_last_.clear();
  last_sample_.clear();
}

// λ = log(α) - log(σ) on float32 0-d CPU tensors; σ = 0 gives +inf as in torch.
float FlowUniPC::lambda(int i) const {
  const float sigma = sigmas_[i];
  const float alpha = 1.0f - sigma;
  return std::log(alpha) - std::log(sigma);
}

namespace {

// x / r for a CPU scalar r applied to a CUDA tensor: torch multiplies by the float32 reciprocal
// (div_true_kernel_cuda); the fixtures were made on the GPU.
inline float div_by_cpu_scalar(float x, float inv_r) { return x * inv_r; }

// torch.linalg.solve([[1, 1], [r, 1]], b) by LU with partial pivoting (what LAPACK/cuSOLVER do).
void solve_2x2(float r, float b1, float b2, float& x1, float& x2) {
  if (std::fabs(r) > 1.0f) {  // pivot on row 2
    const float l = 1.0f * (1.0f / r);
    const float u11 = 1.0f - l * 1.0f;
    const float y2 = b1 - l * b2;
    x2 = y2 / u11;
    x1 = (b2 - 1.0f * x2) / r;
  } else {
    const float l = r;
    const float u11 = 1.0f - l * 1.0f;
    const float y2 = b2 - l * b1;
    x2 = y2 / u11;
    x1 = (b1 - 1.0f * x2) / 1.0f;
  }
}

}  // namespace

// multistep_uni_c_bh_update: refines `sample` (x_i, from the predictor) in place using m_new = m_i.
void FlowUniPC::corrector(std::span<const float> m_new, std::span<float> sample) {
  const int order = this_order_;
  const int i = step_index_;
  const float sigma_t = sigmas_[i], sigma_s0 = sigmas_[i - 1];
  const float alpha_t = 1.0f - sigma_t;
  const float lambda_t = lambda(i), lambda_s0 = lambda(i - 1);
  const float h = lambda_t - lambda_s0;
  const float hh = -h;
  const float h_phi_1 = std::expm1(hh);
  const float B_h = std::expm1(hh);  // bh2
  // b_k = h_phi_k * k! / B_h, h_phi_1 = phi/hh - 1, h_phi_2 = h_phi_1/hh - 1/2.
  float h_phi_k = h_phi_1 / hh - 1.0f;
  const float b1 = h_phi_k * 1.0f / B_h;
  h_phi_k = h_phi_k / hh - 0.5f;
  const float b2 = h_phi_k * 2.0f / B_h;

  const float ratio = sigma_t / sigma_s0;      // sigma_t / sigma_s0 * x
  const float c_m0 = alpha_t * h_phi_1;        // alpha_t * h_phi_1 * m0
  const float c_corr = alpha_t * B_h;          // alpha_t * B_h * (corr_res + rho_last * D1_t)
  const float* x = last_sample_.data();
  const float* m0 = m_last_.data();
  const float* mt = m_new.data();
  float* out = sample.data();
  const size_t n = sample.size();

  if (order == 1) {
    const float rho = 0.5f;
    for (size_t k = 0; k < n; ++k) {
      const float x_t_ = ratio * x[k] - c_m0 * m0[k];
      const float d1_t = mt[k] - m0[k];
      out[k] = x_t_ - c_corr * (0.0f + rho * d1_t);
    }
    return;
  }
  AVDIT_CHECK(order == 2, "UniPC corrector order {} (only 1 and 2 are implemented)", order);
  const float lambda_s1 = lambda(i - 2);
  const float rk = (lambda_s1 - lambda_s0) / h;
  float rho0, rho1;
  solve_2x2(rk, b1, b2, rho0, rho1);
  const float inv_rk = 1.0f / rk;
  const float* m1 = m_prev_.data();
  for (size_t k = 0; k < n; ++k) {
    const float x_t_ = ratio * x[k] - c_m0 * m0[k];
    const float d1 = div_by_cpu_scalar(m1[k] - m0[k], inv_rk);  // (mi - m0) / rk
    const float corr_res = rho0 * d1;                            // einsum over k = 1 term
    const float d1_t = mt[k] - m0[k];
    out[k] = x_t_ - c_corr * (corr_res + rho1 * d1_t);
  }
}

// multistep_uni_p_bh_update: x_{i+1} from the corrected x̃_i (in `sample`) and m_i, m_{i-1}.
void FlowUniPC::predictor(std::span<float> sample) {
  const int order = this_order_;
  const int i = step_index_;
  const float sigma_t = sigmas_[i + 1], sigma_s0 = sigmas_[i];
  const float alpha_t = 1.0f - sigma_t;
  const float lambda_t = lambda(i + 1), lambda_s0 = lambda(i);
  const float h = lambda_t - lambda_s0;  // +inf on the last step (sigma 0)
  const float hh = -h;
  const float h_phi_1 = std::expm1(hh);
  const float B_h = std::expm1(hh);
  const float ratio = sigma_t / sigma_s0;
  const float c_m0 = alpha_t * h_phi_1;
  const float c_pred = alpha_t * B_h;
  const float* m0 = m_last_.data();
  float* x = sample.data();
  const size_t n = sample.size();
  if (order == 1) {
    for (size_t k = 0; k < n; ++k) x[k] = ratio * x[k] - c_m0 * m0[k];
    return;
  }
  AVDIT_CHECK(order == 2, "UniPC predictor order {} (only 1 and 2 are implemented)", order);
  const float lambda_s1 = lambda(i - 1);
  const float rk = (lambda_s1 - lambda_s0) / h;
  const float inv_rk = 1.0f / rk;
  const float* m1 = m_prev_.data();
  for (size_t k = 0; k < n; ++k) {
    const float x_t_ = ratio * x[k] - c_m0 * m0[k];
    const float d1 = div_by_cpu_scalar(m1[k] - m0[k], inv_rk);
    const float pred_res = 0.5f * d1;  // rhos_p = [0.5] for order 2
    x[k] = x_t_ - c_pred * pred_res;
  }
}

void FlowUniPC::step(std::span<const float> velocity, std::span<float> sample) {
  AVDIT_REQUIRE(step_index_ < num_steps(), "UniPC: all {} steps were already taken", num_steps());
  AVDIT_REQUIRE(velocity.size() == sample.size(),
                "UniPC: velocity has {} elements but the sample has {}; expected equal", velocity.size(),
                sample.size());
  AVDIT_REQUIRE(last_sample_.empty() || last_sample_.size() == sample.size(),
                "UniPC: the sample has {} elements but had {} at the previous step", sample.size(),
                last_sample_.size());
  const size_t n = sample.size();
  // convert_model_output: x0 = sample - sigma_t * model_output (on the uncorrected sample).
  scratch_.resize(n);
  const float sigma = sigmas_[step_index_];
  for (size_t k = 0; k < n; ++k) scratch_[k] = sample[k] - sigma * velocity[k];

  if (step_index_ > 0 && !last_sample_.empty()) corrector(scratch_, sample);

  // model_outputs shift left; the new x0 prediction becomes the last one.
  std::swap(m_prev_, m_last_);
  std::swap(m_last_, scratch_);

  // lower_order_final: order min(2, N - i), warm-up: at most lower_order_nums + 1.
  const int this_order = std::min(2, num_steps() - step_index_);
  this_order_ = std::min(this_order, lower_order_nums_ + 1);
  last_sample_.assign(sample.begin(), sample.end());
  predictor(sample);
  if (lower_order_nums_ < 2) ++lower_order_nums_;
  ++step_index_;
}

Tensor FlowUniPC::step(const Tensor& velocity, const Tensor& sample) {
  AVDIT_REQUIRE(velocity.shape() == sample.shape(), "UniPC: velocity shape {} differs from sample shape {}",
                velocity.shape_str(), sample.shape_str());
  const Tensor v = velocity.to_f32();
  Tensor x = sample.to(DType::F32);  // a fresh copy that becomes the result
  step(std::span<const float>(v.f32(), static_cast<size_t>(v.numel())),
       std::span<float>(x.f32(), static_cast<size_t>(x.numel())));
  return x;
}

}  // namespace avdit::sample
