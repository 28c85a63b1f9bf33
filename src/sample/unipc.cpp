// FlowUniPCMultistep (bh2, order 2, predict x0) with the reference's float32 operation order.
// Each element-wise line mirrors one torch expression; the comments name it.
#include "sample/unipc.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace avdit::sample {

UniPCPlanner::UniPCPlanner(std::vector<float> sigmas) : sigmas_(std::move(sigmas)) {
  AVDIT_REQUIRE(sigmas_.size() >= 2, "UniPC: expected at least 2 sigmas (1 step), got {}",
                sigmas_.size());
  for (size_t i = 0; i + 1 < sigmas_.size(); ++i)
    AVDIT_REQUIRE(sigmas_[i] > sigmas_[i + 1] && sigmas_[i] <= 1.0f,
                  "UniPC: expected strictly decreasing sigmas in (0, 1], got sigma[{}] = {} then {}", i,
                  sigmas_[i], sigmas_[i + 1]);
  AVDIT_REQUIRE(sigmas_.back() >= 0.0f, "UniPC: expected a final sigma >= 0, got {}", sigmas_.back());
}

void UniPCPlanner::reset() {
  step_index_ = 0;
  lower_order_nums_ = 0;
  this_order_ = 0;
}

// λ = log(α) - log(σ) on float32 0-d CPU tensors; σ = 0 gives +inf as in torch.
float UniPCPlanner::lambda(int i) const {
  const float sigma = sigmas_[i];
  const float alpha = 1.0f - sigma;
  return std::log(alpha) - std::log(sigma);
}

namespace {

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

// multistep_uni_c_bh_update at step i (refines x_i, order of the previous step).
elem::UniPCUpdate UniPCPlanner::corrector(int order) const {
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

  elem::UniPCUpdate u;
  u.order = order;
  u.ratio = sigma_t / sigma_s0;    // sigma_t / sigma_s0 * x
  u.c_m0 = alpha_t * h_phi_1;      // alpha_t * h_phi_1 * m0
  u.c_res = alpha_t * B_h;         // alpha_t * B_h * (corr_res + rho_last * D1_t)
  if (order == 1) return u;        // rho = 0.5
  AVDIT_CHECK(order == 2, "UniPC corrector order {} (only 1 and 2 are implemented)", order);
  const float lambda_s1 = lambda(i - 2);
  const float rk = (lambda_s1 - lambda_s0) / h;
  solve_2x2(rk, b1, b2, u.rho0, u.rho1);
  u.inv_rk = 1.0f / rk;
  return u;
}

// multistep_uni_p_bh_update at step i: x_{i+1} from the corrected x̃_i and m_i, m_{i-1}.
elem::UniPCUpdate UniPCPlanner::predictor(int order) const {
  const int i = step_index_;
  const float sigma_t = sigmas_[i + 1], sigma_s0 = sigmas_[i];
  const float alpha_t = 1.0f - sigma_t;
  const float lambda_t = lambda(i + 1), lambda_s0 = lambda(i);
  const float h = lambda_t - lambda_s0;  // +inf on the last step (sigma 0)
  const float hh = -h;
  const float h_phi_1 = std::expm1(hh);
  const float B_h = std::expm1(hh);
  elem::UniPCUpdate u;
  u.order = order;
  u.ratio = sigma_t / sigma_s0;
  u.c_m0 = alpha_t * h_phi_1;
  u.c_res = alpha_t * B_h;
  if (order == 1) return u;
  AVDIT_CHECK(order == 2, "UniPC predictor order {} (only 1 and 2 are implemented)", order);
  const float lambda_s1 = lambda(i - 1);
  const float rk = (lambda_s1 - lambda_s0) / h;
  u.inv_rk = 1.0f / rk;  // rhos_p = [0.5] for order 2
  return u;
}

elem::UniPCStepPlan UniPCPlanner::next() {
  AVDIT_REQUIRE(step_index_ < num_steps(), "UniPC: all {} steps were already taken", num_steps());
  elem::UniPCStepPlan p;
  p.sigma = sigmas_[step_index_];
  p.correct = step_index_ > 0;
  if (p.correct) p.corrector = corrector(this_order_);
  // lower_order_final: order min(2, N - i), warm-up: at most lower_order_nums + 1.
  this_order_ = std::min(std::min(2, num_steps() - step_index_), lower_order_nums_ + 1);
  p.predictor = predictor(this_order_);
  if (lower_order_nums_ < 2) ++lower_order_nums_;
  ++step_index_;
  return p;
}

void FlowUniPC::reset() {
  plan_.reset();
  last_sample_.clear();
  m_last_.clear();
  m_prev_.clear();
}

void FlowUniPC::step(std::span<const float> velocity, std::span<float> sample) {
  AVDIT_REQUIRE(velocity.size() == sample.size(),
                "UniPC: velocity has {} elements but the sample has {}; expected equal", velocity.size(),
                sample.size());
  AVDIT_REQUIRE(plan_.step_index() == 0 || last_sample_.size() == sample.size(),
                "UniPC: the sample has {} elements but had {} at the previous step", sample.size(),
                last_sample_.size());
  const elem::UniPCStepPlan p = plan_.next();
  const size_t n = sample.size();
  if (p.correct == false) {
    last_sample_.assign(n, 0.0f);
    m_last_.assign(n, 0.0f);
    m_prev_.assign(n, 0.0f);
  }
  for (size_t k = 0; k < n; ++k) elem::unipc_step(p, velocity[k], sample[k], last_sample_[k], m_last_[k], m_prev_[k]);
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
