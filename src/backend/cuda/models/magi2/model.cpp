// The MAGI-2 preview forward on the GPU (see model.h), step for step as models/magi2/model.cpp and its branches
// (attention.cpp, mlp.cpp, moe.cpp, mhc.cpp). The residual stream s lives in modality-sorted order; a
// per-modality (G = 3) linear is one GEMM per group on that group's contiguous rows, written in place into one
// output. Every temporary of a layer stays alive until the layer ends (peak_activation_bytes counts them so);
// device memory comes from the stream-ordered pool (cuda_empty), so releasing them enqueues, never waits.
#include "backend/cuda/models/magi2/model.h"
#include "backend/cuda/nvfp4.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "backend/cuda/models/magi2/gemm.h"
#include "backend/cuda/models/magi2/kernels.h"
#include "backend/cuda/models/magi2/mhc.h"
#include "backend/cuda/ops_cuda.h"
#include "models/magi2/api.h"
#include "models/magi2/layers.h"
#include "models/magi2/token_layout.h"

namespace avdit::cuda::magi2 {
namespace {

using models::magi2::kNormEps;
using models::magi2::Magi2Config;
using models::magi2::PackedSequence;
using models::magi2::TokenLayout;

moe::RouterConfig router_config(const Magi2Config& c) {
  moe::RouterConfig rc;
  rc.heads = c.moe.num_heads;
  rc.experts = c.moe.num_experts;
  rc.top_k = c.moe.top_k;
  rc.head_dim = c.moe_head_dim;
  rc.softmax = c.moe.score_func == "softmax";
  rc.route_norm = c.moe.route_norm;
  rc.route_scale = static_cast<float>(c.moe.route_scale);
  return rc;
}

Tensor upload_i32(Device& dev, const std::vector<int32_t>& v) {
  return to_device(dev, Tensor::from_data({static_cast<int64_t>(v.size())}, DType::I32, v.data()));
}

}  // namespace

// Per-forward state: the token layout (host sizes, device indices), tables, and the scratch of the current layer.
struct Magi2CudaModel::Step {
  TokenLayout layout;
  Tensor perm, inv, group;  // I32 [L]: permuted row -> packed token, packed token -> permuted row, row -> modality
  Tensor cu_seqlens;        // I32 [B + 1]
  Tensor rope;              // [L, 6B] F32, packed order
  int64_t L = 0;
};

Magi2CudaModel::Magi2CudaModel(Device& dev, const models::magi2::Magi2Weights& weights, bool bf16)
    : dev_(dev), bf16_(bf16), w_(upload_weights(dev, weights, bf16)) {
  // Where the grouped Hopper GEMMs run, bf16 routed experts are packed for them here, once, and the
  // unpacked copy is released (one resident copy). NVFP4 experts are expanded per call (routed_experts).
  const moe::RouterConfig rc = router_config(w_.config);
  const int64_t De = w_.config.moe.expert_intermediate_size;
  grouped_.resize(w_.layers.size());
  if (!moe::grouped_supported(dev_, w_.gemm_dtype, rc, De, w_.gemm_dtype)) return;
  for (size_t i = 0; i < w_.layers.size(); ++i) {
    DeviceLayer& lw = w_.layers[i];
    if (!lw.moe || lw.packed_gate) continue;
    const int64_t before = lw.experts.gate.nbytes() + lw.experts.up.nbytes() + lw.experts.down.nbytes();
    grouped_[i] = moe::pack_grouped_weights(dev_, lw.experts, rc);
    lw.experts = {};
    w_.bytes += grouped_[i]->gate_up.nbytes() + grouped_[i]->down.nbytes() - before;
  }
}

Tensor Magi2CudaModel::forward_device(const PackedSequence& p, const CudaForwardOptions& options, TensorMap* dumps) {
  const Magi2Config& c = w_.config;
  counts_ = {};
  live_bytes_ = peak_bytes_ = 0;
  const int64_t L = p.tokens(), R = c.residual_width, tc = c.data_proxy.time_channel_dim;
  AVDIT_REQUIRE(L > 0, "magi2 cuda forward: the packed sequence is empty");
  AVDIT_REQUIRE(p.x.ndim() == 2 && p.x.size(1) >= c.max_in_channels,
                "magi2 cuda forward: packed x has shape {}, expected [L, >= {}]", p.x.shape_str(), c.max_in_channels);
  AVDIT_REQUIRE(static_cast<int64_t>(p.modality.size()) == L, "magi2 cuda forward: {} modality ids for {} tokens",
                p.modality.size(), L);
  AVDIT_REQUIRE(p.coords.defined() && p.coords.size(0) == L && p.coords.size(1) == 9,
                "magi2 cuda forward: coords_mapping must be [{}, 9]", L);
  AVDIT_REQUIRE(p.cu_seqlens.size() >= 2 && p.cu_seqlens.front() == 0 && p.cu_seqlens.back() == L &&
                    std::is_sorted(p.cu_seqlens.begin(), p.cu_seqlens.end()),
                "magi2 cuda forward: cu_seqlens must rise from 0 to {}", L);
  const bool time_on_device = options.device_time_embedding || !p.time_tokens.defined();
  if (tc > 0) {
    if (time_on_device)
      AVDIT_REQUIRE(p.per_token_t.defined() && p.per_token_t.numel() == L,
                    "magi2 cuda forward: per_token_t must have {} values", L);
    else
      AVDIT_REQUIRE(p.time_tokens.ndim() == 2 && p.time_tokens.size(0) == L && p.time_tokens.size(1) == tc,
                    "magi2 cuda forward: time_token_sequence must be [{}, {}], found {}", L, tc,
                    p.time_tokens.shape_str());
  }
  const bool dump = dumps != nullptr;
  const DType act = w_.gemm_dtype;

  Step st;
  st.L = L;
  st.layout = TokenLayout::from_modality(p.modality);  // validates the ids
  {
    std::vector<int32_t> perm(L), inv(L), group(L);
    for (int64_t r = 0; r < L; ++r) {
      perm[r] = static_cast<int32_t>(st.layout.perm[r]);
      inv[r] = static_cast<int32_t>(st.layout.inv[r]);
    }
    for (int m = 0; m < 3; ++m)
      std::fill(group.begin() + st.layout.begin[m], group.begin() + st.layout.begin[m] + st.layout.size[m], m);
    std::vector<int32_t> cu(p.cu_seqlens.begin(), p.cu_seqlens.end());
    st.perm = upload_i32(dev_, perm);
    st.inv = upload_i32(dev_, inv);
    st.group = upload_i32(dev_, group);
    st.cu_seqlens = upload_i32(dev_, cu);
  }
  // Forward-long tensors are tracked as live for the whole call.
  auto track = [&](Tensor t) {
    live_bytes_ += t.nbytes();
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    return t;
  };
  for (const Tensor* t : {&st.perm, &st.inv, &st.group, &st.cu_seqlens}) track(*t);
  auto alloc = [&](Shape shape, DType dt) { return track(cuda_empty(dev_, std::move(shape), dt)); };
  // Permuted rows -> packed order, for dumps.
  auto record = [&](const std::string& name, const Tensor& permuted) {
    Tensor out = alloc(permuted.shape(), permuted.dtype());
    gather_rows_into(dev_, permuted, st.inv, out);
    ++counts_.kernels;
    (*dumps)[name] = out;
  };

  const Tensor x = track(to_device(dev_, p.x.to_f32()));
  const Tensor coords = track(to_device(dev_, p.coords.to_f32()));
  Tensor time;
  if (tc > 0) {
    if (time_on_device) {
      const Tensor t = track(to_device(dev_, p.per_token_t.to_f32()));
      time = alloc({L, tc}, DType::F32);
      time_embedding(dev_, t, tc, time);
      ++counts_.kernels;
    } else {
      time = track(to_device(dev_, p.time_tokens.to_f32()));
    }
  }
  st.rope = alloc({L, 6 * c.rope_bands}, DType::F32);
  rope_table(dev_, coords, w_.rope_bands, st.rope);
  ++counts_.kernels;
  if (dump) (*dumps)["rope"] = st.rope;

  // PreAdapter: each modality's embedder on its first C_m columns, in permuted order.
  Tensor s = alloc({L, R}, act);
  {
    Tensor x_perm = alloc({L, p.x.size(1)}, DType::F32);
    gather_rows_into(dev_, x, st.perm, x_perm);
    ++counts_.kernels;
    Tensor y = alloc({L, R}, DType::F32);
    for (int m = 0; m < 3; ++m) {
      if (st.layout.size[m] == 0) continue;
      gemm_rows(dev_, x_perm, w_.embedder_w[m], false, y, st.layout.begin[m],
                st.layout.begin[m] + st.layout.size[m]);
      ++counts_.gemms;
    }
    Tensor pre_time, embed;
    if (dump) {
      pre_time = alloc({L, R}, DType::F32);
      embed = alloc({L, R}, DType::F32);
    }
    // + bias, the time embedding overwrites channels [0, tc), cast to the stream dtype (bf16 mode: the
    // TransformerBlock's cast of the fp32 embedding).
    embed_epilogue(dev_, y, w_.embedder_b, st.group, time, st.perm, tc, s, dump ? &pre_time : nullptr,
                   dump ? &embed : nullptr);
    ++counts_.kernels;
    if (dump) {
      record("embed_pre_time", pre_time);
      record("embed", embed);
    }
    live_bytes_ -= x_perm.nbytes() + y.nbytes() + (dump ? pre_time.nbytes() + embed.nbytes() : 0);  // released here
  }

  for (int64_t i = 0; i < c.num_layers; ++i) layer(st, i, s, dumps);

  // PostAdapter in fp32: RMSNorm over all n*hidden channels with the video / audio weight, the final linear of
  // the modality; text rows stay 0.
  const Tensor yn = track(rms_norm(dev_, s, w_.final_norm, kNormEps, true, &st.group, DType::F32));
  ++counts_.kernels;
  const int64_t width = c.out_channels;
  Tensor out_perm = alloc({L, width}, DType::F32);
  AVDIT_CUDA_CHECK(cudaMemsetAsync(device_ptr(out_perm), 0, static_cast<size_t>(out_perm.nbytes()), dev_.stream()));
  ++counts_.memsets;
  for (int m = 0; m < 2; ++m) {
    if (st.layout.size[m] == 0) continue;
    gemm_rows(dev_, yn, w_.final_linear[m], false, out_perm, st.layout.begin[m],
              st.layout.begin[m] + st.layout.size[m]);
    ++counts_.gemms;
  }
  Tensor model_output = alloc({L, width}, DType::F32);
  gather_rows_into(dev_, out_perm, st.inv, model_output);
  ++counts_.kernels;
  return model_output;
}

void Magi2CudaModel::layer(Step& st, int64_t i, Tensor& s, TensorMap* dumps) {
  const Magi2Config& c = w_.config;
  const DeviceLayer& lw = w_.layers[i];
  const TokenLayout& layout = st.layout;
  const int64_t L = st.L, n = c.mhc_num_stream, hidden = c.hidden_size, Hq = c.num_heads_q,
                Hkv = c.num_heads_kv, D = c.head_dim, G = lw.groups;
  const DType act = w_.gemm_dtype;
  const bool dump = dumps != nullptr;
  const std::string prefix = "layers." + std::to_string(i) + ".";
  int64_t layer_bytes = 0;
  std::vector<Tensor> keep;
  auto hold = [&](Tensor t) {
    keep.push_back(t);
    layer_bytes += t.nbytes();
    live_bytes_ += t.nbytes();
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    return t;
  };
  auto alloc = [&](Shape shape, DType dt) { return hold(cuda_empty(dev_, std::move(shape), dt)); };
  auto record = [&](const std::string& name, const Tensor& permuted) {
    if (!dump) return;
    Tensor out = cuda_empty(dev_, permuted.shape(), permuted.dtype());
    live_bytes_ += out.nbytes();  // dumps live to the end of the forward
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    gather_rows_into(dev_, permuted, st.inv, out);
    ++counts_.kernels;
    (*dumps)[prefix + name] = out;
  };
  const Tensor* grp = G > 1 ? &st.group : nullptr;
  auto norm = [&](const Tensor& x, const Tensor& w, const Tensor* group, DType out) {
    ++counts_.kernels;
    return hold(rms_norm(dev_, x, w, kNormEps, true, group, out));
  };
  // y [L, N] = the per-modality linear (groups 1 or 3, weight rows stacked [video; audio; text]).
  auto linear = [&](const Tensor& x, const Tensor& w, int64_t groups) {
    AVDIT_REQUIRE(w.size(0) % groups == 0, "magi2 cuda: weight {} for {} groups", w.shape_str(), groups);
    const int64_t N = w.size(0) / groups;
    Tensor y = alloc({L, N}, act);
    if (groups == 1) {
      gemm_rows(dev_, x, w, false, y, 0, L);
      ++counts_.gemms;
      return y;
    }
    for (int64_t m = 0; m < groups; ++m) {
      if (layout.size[m] == 0) continue;
      gemm_rows(dev_, x, w.slice_rows(m * N, (m + 1) * N), false, y, layout.begin[m],
                layout.begin[m] + layout.size[m]);
      ++counts_.gemms;
    }
    return y;
  };
  // mHC coefficients from the RMS-normalised flat state (fp32), rounded to bf16 in the bf16 mode.
  auto mhc = [&](const DeviceMhcBranch& b) {
    DeviceMhcCoefficients co = mhc_coefficients(dev_, s, lw.mhc_norm, grp, b, n, bf16_);
    for (const Tensor* t : {&co.normed, &co.logits, &co.h_pre, &co.h_post, &co.h_res}) hold(*t);
    counts_.kernels += 2;  // norm, epilogue
    ++counts_.gemms;
    return co;
  };

  // ---- attention branch --------------------------------------------------------------------------------
  const DeviceMhcCoefficients ca = mhc(lw.mhc_attn);
  Tensor attn_in = alloc({L, hidden}, act);
  mhc_apply_pre(dev_, s, ca.h_pre, n, attn_in);
  ++counts_.kernels;
  const Tensor a = norm(attn_in, lw.attn_pre_norm, grp, act);
  const Tensor g = linear(a, lw.linear_g, G);      // [L, Hq]
  const Tensor qkv = linear(a, lw.linear_qkv, G);  // [L, (Hq + 2 Hkv) D]
  Tensor q = alloc({L, Hq, D}, act), k = alloc({L, Hkv, D}, act), v = alloc({L, Hkv, D}, act);
  qkv_prologue(dev_, qkv, lw.q_norm, lw.k_norm, grp, st.inv, st.rope, c.rope_dim / 2, Hq, Hkv, D, q, k, v);
  ++counts_.kernels;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const Tensor o = hold(attention(dev_, q, k, v, scale, st.cu_seqlens, &lw.sinks, nullptr, act));
  ++counts_.kernels;
  Tensor og = alloc({L, Hq * D}, act);
  gate_unpermute(dev_, o, g, st.perm, bf16_, og);
  ++counts_.kernels;
  const Tensor attn_out = linear(og, lw.linear_proj, G);
  mhc_hyper_connect_(dev_, s, attn_out, ca.h_post, ca.h_res, n);
  ++counts_.kernels;

  // ---- MLP branch (same mhc_norm weight) -----------------------------------------------------------------
  const DeviceMhcCoefficients cm = mhc(lw.mhc_mlp);
  Tensor mlp_in = alloc({L, hidden}, act);
  mhc_apply_pre(dev_, s, cm.h_pre, n, mlp_in);
  ++counts_.kernels;
  Tensor mlp_out;
  if (lw.moe) {
    const int64_t Hm = c.moe.num_heads;
    const Tensor xn = norm(mlp_in, lw.mlp_pre_norm, &st.group, act);  // always the three modality rows
    const Tensor split = linear(xn, lw.split_linear, 1);               // [L, W]
    const moe::RouterConfig rc = router_config(c);
    const moe::Routing routing = moe::route(dev_, split, lw.router_gate, lw.expert_bias, rc, dump);
    ++counts_.moe_calls;
    hold(routing.indices);
    hold(routing.weights);
    if (routing.logits.defined()) hold(routing.logits);
    // [routed experts' output | shared expert's h] side by side: one GEMM with [merge | shared_fc2] sums
    // both (DeviceLayer::merge_shared); the combine and the swiglu7 write their columns in place.
    const int64_t W = split.size(1), Is = lw.merge_shared.size(1) - W;
    Tensor cat = alloc({L, W + Is}, act);
    routed_experts(i, split, routing, rc, &cat);
    ++counts_.moe_calls;
    // Shared expert on every token + the modality-specific shared expert; fc1 rows interleave gate / linear.
    const Tensor sh_u = linear(xn, lw.shared_fc1, 1);
    swiglu7_interleaved(dev_, sh_u, act, &cat, W);
    ++counts_.kernels;
    const Tensor ms_u = linear(xn, lw.ms_fc1, models::magi2::kNumModalities);
    const Tensor ms_h = hold(swiglu7_interleaved(dev_, ms_u, act));
    ++counts_.kernels;
    // The three outputs are summed by the GEMMs themselves instead of element-wise passes over
    // [L, hidden]: the specific experts' output is the merge GEMM's C operand (cuBLASLt, beta = 1).
    const Tensor specific = linear(ms_h, lw.ms_fc2, models::magi2::kNumModalities);
    mlp_out = hold(cuda::linear(dev_, cat, lw.merge_shared, nullptr, act, &specific));
    ++counts_.gemms;
    if (dump) {  // the parts on their own, for the fixtures
      const Tensor experts_out = slice_columns(dev_, cat, 0, W);
      record("moe.merge_out", linear(experts_out, slice_columns(dev_, lw.merge_shared, 0, W), 1));
      record("moe.shared_out", cuda::linear(dev_, slice_columns(dev_, cat, W, Is),
                                            slice_columns(dev_, lw.merge_shared, W, Is), nullptr, act, &specific));
      record("moe.split_out", split);
      record("moe.experts_out", experts_out);
      if (routing.logits.defined()) record("router.logits", routing.logits.reshape({L, Hm, c.moe.num_experts}));
      record("router.topk_weights", routing.weights.reshape({L, Hm, c.moe.top_k}));
      record("router.topk_indices", routing.indices.reshape({L, Hm, c.moe.top_k}));
    }
  } else {
    const Tensor an = norm(mlp_in, lw.mlp_pre_norm, grp, act);
    const Tensor u = linear(an, lw.up_gate_proj, G);  // [L, 2I]
    const Tensor h = hold(swiglu7_interleaved(dev_, u, act));
    ++counts_.kernels;
    mlp_out = linear(h, lw.down_proj, G);
  }
  mhc_hyper_connect_(dev_, s, mlp_out, cm.h_post, cm.h_res, n);
  ++counts_.kernels;
  if (dump) {
    record("mhc.attn.h_pre", ca.h_pre);
    record("mhc.attn.h_post", ca.h_post);
    record("mhc.attn.h_res", ca.h_res);
    record("attn_in", attn_in);
    record("attn_out", attn_out);
    record("mhc.mlp.h_pre", cm.h_pre);
    record("mhc.mlp.h_post", cm.h_post);
    record("mhc.mlp.h_res", cm.h_res);
    record("mlp_in", mlp_in);
    record("mlp_out", mlp_out);
    record("output", s);
  }
  live_bytes_ -= layer_bytes;  // `keep` goes back to the pool here (stream-ordered: no synchronisation)
}

moe::ExpertWeights Magi2CudaModel::expert_weights(const DeviceLayer& lw) {
  if (!lw.packed_gate) return lw.experts;
  const DeviceLayer::PackedExperts* packed[3] = {&*lw.packed_gate, &*lw.packed_up, &*lw.packed_down};
  moe::ExpertWeights ew;
  ew.k_major = true;
  Tensor* out[3] = {&ew.gate, &ew.up, &ew.down};
  for (int m = 0; m < 3; ++m) {
    const Tensor& v = packed[m]->values;  // [G, N, K/2]
    const Shape shape = {v.size(0), v.size(1), v.size(2) * 2};
    Tensor& scratch = nvfp4_scratch_[m];
    if (!scratch.defined() || scratch.shape() != shape) scratch = cuda_empty(dev_, shape, DType::BF16);
    dequantize_nvfp4_bf16(dev_, v, packed[m]->block_scales, packed[m]->global_scales, 0, shape[0], scratch);
    ++counts_.kernels;
    // fp32 mode: the CPU path widens the same bf16 values (models/magi2/moe.cpp), so widen here too.
    *out[m] = bf16_ ? scratch : cast(dev_, scratch, DType::F32);
  }
  return ew;
}

Tensor Magi2CudaModel::routed_experts(int64_t i, const Tensor& split, const moe::Routing& routing,
                                      const moe::RouterConfig& rc, Tensor* into) {
  const DeviceLayer& lw = w_.layers[i];
  const DType act = w_.gemm_dtype;
  const int64_t De = w_.config.moe.expert_intermediate_size;
  if (grouped_[i]) return moe::routed_experts(dev_, split, routing, *grouped_[i], rc, act, into);
  if (!moe::grouped_supported(dev_, split.dtype(), rc, De, act))
    return moe::routed_experts(dev_, split, routing, expert_weights(lw), rc, act, into);
  // The constructor packed every bf16 MoE layer where the grouped path runs: what is left are NVFP4 experts.
  AVDIT_CHECK(lw.packed_gate.has_value(), "magi2 cuda: layer {} has neither packed nor NVFP4 experts", i);
  // NVFP4: gate into the even rows and up into the odd rows of one [G, 2 De, D] scratch (the grouped
  // GEMMs' interleaved layout, no extra pass), down as [G, D, De].
  const Tensor& v = lw.packed_gate->values;  // [G, De, D/2]
  const int64_t G = v.size(0), D = 2 * v.size(2);
  moe::GroupedWeights& g = nvfp4_grouped_;
  if (!g.gate_up.defined() || g.gate_up.shape() != Shape{G, 2 * De, D}) {
    g.gate_up = cuda_empty(dev_, {G, 2 * De, D}, DType::BF16);
    g.down = cuda_empty(dev_, {G, D, De}, DType::BF16);
    g.inter = De;
  }
  const DeviceLayer::PackedExperts* parts[3] = {&*lw.packed_gate, &*lw.packed_up, &*lw.packed_down};
  for (int m = 0; m < 2; ++m)
    dequantize_nvfp4_bf16(dev_, parts[m]->values, parts[m]->block_scales, parts[m]->global_scales, 0, G,
                          g.gate_up, 2, m);
  dequantize_nvfp4_bf16(dev_, parts[2]->values, parts[2]->block_scales, parts[2]->global_scales, 0, G, g.down);
  counts_.kernels += 3;
  return moe::routed_experts(dev_, split, routing, g, rc, act, into);
}

TensorMap Magi2CudaModel::forward(const PackedSequence& packed, const CudaForwardOptions& options) {
  TensorMap dev_dumps;
  const Tensor out = forward_device(packed, options, options.dump ? &dev_dumps : nullptr);
  TensorMap result;
  result["model_output"] = to_host(dev_, out);
  for (const auto& [name, t] : dev_dumps) {
    const Tensor h = to_host(dev_, t);
    if (h.dtype() == DType::I32)
      result[name] = h.to(DType::I64);  // router indices, I64 as the CPU and the fixture store them
    else
      result[name] = h.to_f32();
  }
  if (options.dump) {
    const TokenLayout layout = TokenLayout::from_modality(packed.modality);
    Tensor sizes = Tensor::empty({3}, DType::I32);
    for (int m = 0; m < 3; ++m) sizes.data<int32_t>()[m] = static_cast<int32_t>(layout.size[m]);
    result["modality_group_sizes"] = sizes;
  }
  return result;
}

TensorMap forward_from_inputs_cuda(Device& dev, const Checkpoint& ckpt, const TensorMap& inputs, bool dump,
                                   bool bf16, CudaForwardStats* stats, const models::magi2::LoadOptions& load) {
  const Magi2Config config = models::magi2::config_from_checkpoint(ckpt);
  const models::magi2::Magi2Weights weights = models::magi2::load_magi2_weights(ckpt, config, load);
  const PackedSequence packed = models::magi2::pack_inputs(config, inputs);
  Magi2CudaModel model(dev, weights, bf16);
  CudaForwardOptions options;
  options.dump = dump;
  options.device_time_embedding = true;
  TensorMap out = model.forward(packed, options);
  if (stats) {
    stats->weight_bytes = model.weight_bytes();
    stats->peak_activation_bytes = model.peak_activation_bytes();
    stats->launches = model.launches();
  }
  models::magi2::add_unpacked_outputs(config, packed, dump, out);
  return out;
}

}  // namespace avdit::cuda::magi2
