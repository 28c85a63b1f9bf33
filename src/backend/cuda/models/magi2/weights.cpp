// Uploading the MAGI-2 preview weights to the device (see weights.h): one synchronous copy per tensor at load
// time, converted on the host where the mode's dtype differs from the stored one.
#include "backend/cuda/models/magi2/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cuda/ops_cuda.h"
#include "models/magi2/layers.h"

namespace avdit::cuda::magi2 {
namespace {

using models::magi2::Magi2Config;
using models::magi2::Magi2Weights;

class Uploader {
 public:
  explicit Uploader(Device& dev) : dev_(dev) {}

  // The host tensor (any float dtype, possibly mapped) as a device tensor of `dtype`, reshaped.
  Tensor operator()(const Tensor& host, DType dtype, Shape shape = {}) {
    AVDIT_REQUIRE(host.defined(), "magi2 upload: a weight is missing");
    const Tensor h = host.dtype() == dtype ? host : host.to(dtype);
    Tensor d = to_device(dev_, h);
    bytes_ += d.nbytes();
    return shape.empty() ? d : d.reshape(std::move(shape));
  }
  // Rows stacked into one [rows, width] F32 device table (absent rows are zeros).
  Tensor table(const std::vector<const Tensor*>& rows, int64_t width) {
    Tensor h = Tensor::zeros({static_cast<int64_t>(rows.size()), width}, DType::F32);
    for (size_t r = 0; r < rows.size(); ++r) {
      if (!rows[r]) continue;
      const Tensor f = rows[r]->to_f32();
      AVDIT_REQUIRE(f.numel() == width, "magi2 upload: a row of {} values for width {}", f.numel(), width);
      std::memcpy(h.f32() + static_cast<int64_t>(r) * width, f.f32(), sizeof(float) * width);
    }
    return (*this)(h, DType::F32);
  }
  // Per-head expert slices [E, a, b] concatenated into one [H*E, a, b] device tensor.
  Tensor experts(const std::vector<Tensor>& heads, DType dtype) {
    AVDIT_REQUIRE(!heads.empty(), "magi2 upload: no expert heads");
    Shape shape = heads[0].shape();
    const int64_t per_head = shape[0];
    shape[0] = per_head * static_cast<int64_t>(heads.size());
    Tensor d = cuda_empty(dev_, shape, dtype);
    char* dst = static_cast<char*>(device_ptr(d));
    for (const Tensor& hd : heads) {
      AVDIT_REQUIRE(hd.shape() == heads[0].shape(), "magi2 upload: expert heads of shapes {} and {}", hd.shape_str(),
                    heads[0].shape_str());
      const Tensor h = hd.dtype() == dtype ? hd : hd.to(dtype);
      AVDIT_CUDA_CHECK(cudaMemcpy(dst, h.raw(), static_cast<size_t>(h.nbytes()), cudaMemcpyHostToDevice));
      dst += h.nbytes();
    }
    bytes_ += d.nbytes();
    return d;
  }
  int64_t bytes() const { return bytes_; }

 private:
  Device& dev_;
  int64_t bytes_ = 0;
};

}  // namespace

DeviceMhcBranch upload_mhc_branch(Device& dev, const models::magi2::MhcBranchWeights& w, int64_t width) {
  Uploader up(dev);
  DeviceMhcBranch d;
  // As mhc.cpp: alpha (f32) * (1/sqrt(width) as f32).
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(width)));
  d.scalars = MhcScalars{w.alpha_pre * scale, w.alpha_post * scale, w.alpha_res * scale};
  d.bias_pre = up(w.bias_pre, DType::F32);
  d.bias_post = up(w.bias_post, DType::F32);
  d.bias_res = up(w.bias_res, DType::F32, {w.bias_res.numel()});
  d.phi = up(w.phi, DType::F32);
  d.bytes = up.bytes();
  return d;
}

DeviceWeights upload_weights(Device& dev, const Magi2Weights& w, bool bf16) {
  const Magi2Config& c = w.config;
  Uploader up(dev);
  DeviceWeights d;
  d.config = c;
  const DType g = bf16 ? DType::BF16 : DType::F32;
  d.gemm_dtype = g;
  const int64_t R = c.residual_width, hidden = c.hidden_size, D = c.head_dim;
  int64_t mhc_bytes = 0;
  d.embedder_w[0] = up(w.video_embedder_w, DType::F32);
  d.embedder_w[1] = up(w.audio_embedder_w, DType::F32);
  d.embedder_w[2] = up(w.text_embedder_w, DType::F32);
  d.embedder_b = up.table({&w.video_embedder_b, &w.audio_embedder_b, &w.text_embedder_b}, R);
  d.rope_bands = up(w.rope_bands, DType::F32);
  d.final_norm = up.table({&w.final_norm_video, &w.final_norm_audio, nullptr}, R);
  d.final_linear[0] = up(w.final_linear_video, DType::F32);
  d.final_linear[1] = up(w.final_linear_audio, DType::F32);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const models::magi2::LayerWeights& lw = w.layers[i];
    DeviceLayer L;
    L.groups = lw.groups;
    L.moe = lw.moe;
    L.mhc_attn = upload_mhc_branch(dev, lw.mhc_attn, R);
    L.mhc_mlp = upload_mhc_branch(dev, lw.mhc_mlp, R);
    mhc_bytes += L.mhc_attn.bytes + L.mhc_mlp.bytes;
    L.mhc_norm = up(lw.mhc_norm, DType::F32, {lw.groups, R});
    const models::magi2::AttentionWeights& a = lw.attention;
    L.attn_pre_norm = up(a.pre_norm, DType::F32, {lw.groups, hidden});
    L.linear_qkv = up(a.linear_qkv, g);
    L.linear_g = up(a.linear_g, g);
    L.linear_proj = up(a.linear_proj, g);
    L.q_norm = up(a.q_norm, DType::F32, {lw.groups, D});
    L.k_norm = up(a.k_norm, DType::F32, {lw.groups, D});
    L.sinks = up(models::magi2::combined_sinks(a.sinks), DType::F32);
    if (lw.moe) {
      const models::magi2::MoeWeights& m = lw.moe_mlp;
      AVDIT_REQUIRE(m.expert_begin == 0 && m.expert_end == c.moe.num_experts,
                    "magi2 cuda: layer {} holds experts [{}, {}) of {}; the GPU forward needs all of them", i,
                    m.expert_begin, m.expert_end, c.moe.num_experts);
      L.mlp_pre_norm = up(m.pre_norm, DType::F32, {models::magi2::kNumModalities, hidden});
      L.split_linear = up(m.split_linear, g);
      L.router_gate = up(m.gate, DType::F32);
      L.expert_bias = up(m.expert_bias, DType::F32);
      if (!m.heads.empty() && m.heads[0].nvfp4()) {
        // Packed experts stay packed: the per-head tensors are stacked as they are (bytes unchanged).
        auto packed = [&](auto member) {
          std::vector<Tensor> v, sc, gs;
          for (const models::magi2::MoeHeadExperts& h : m.heads) {
            AVDIT_REQUIRE(h.nvfp4(), "magi2 cuda: layer {} mixes NVFP4 and plain expert heads", i);
            const quant::Nvfp4Matrix& q = *(h.*member);
            v.push_back(q.values);
            sc.push_back(q.block_scales);
            gs.push_back(q.global_scales);
          }
          return DeviceLayer::PackedExperts{up.experts(v, DType::U8), up.experts(sc, DType::F8_E4M3),
                                            up.experts(gs, DType::F32)};
        };
        L.packed_gate = packed(&models::magi2::MoeHeadExperts::W_gate_nvfp4);
        L.packed_up = packed(&models::magi2::MoeHeadExperts::W_up_nvfp4);
        L.packed_down = packed(&models::magi2::MoeHeadExperts::W_down_nvfp4);
      } else {
        std::vector<Tensor> wg, wu, wd;
        for (const models::magi2::MoeHeadExperts& h : m.heads) {
          wg.push_back(h.W_gate);
          wu.push_back(h.W_up);
          wd.push_back(h.W_down);
        }
        L.experts.gate = up.experts(wg, g);
        L.experts.up = up.experts(wu, g);
        L.experts.down = up.experts(wd, g);
      }
      L.shared_fc1 = up(m.shared_fc1, g);
      L.merge_shared = concat_columns(dev, up(m.merge_linear, g), up(m.shared_fc2, g));
      L.ms_fc1 = up(m.ms_fc1, g);
      L.ms_fc2 = up(m.ms_fc2, g);
    } else {
      L.mlp_pre_norm = up(lw.dense.pre_norm, DType::F32, {lw.groups, hidden});
      L.up_gate_proj = up(lw.dense.up_gate_proj, g);
      L.down_proj = up(lw.dense.down_proj, g);
    }
    d.layers.push_back(std::move(L));
  }
  d.bytes = up.bytes() + mhc_bytes;
  return d;
}

}  // namespace avdit::cuda::magi2
