// The H3 forward on the GPU, step by step as models/h3/model.cpp (numbered as the golden README's
// "Forward pass"). Element-wise steps are the fused kernels of kernels.cu; GEMMs go through the
// cached cuBLASLt plans of gemm.h into the activation arena.
#include "backend/cuda/models/h3/model_cuda.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/models/h3/kernels.h"
#include "backend/cuda/ops_cuda.h"
#include "models/h3/rope.h"
#include "models/h3/time_embedding.h"
#include "models/precision.h"

namespace avdit::cuda::h3 {
namespace mh = ::avdit::models::h3;

const char* precision_name(Precision p) { return p == Precision::BF16 ? "bf16" : "fp32"; }

const char* attention_name(AttentionImpl a) {
  switch (a) {
    case AttentionImpl::Flash: return "flash";
    case AttentionImpl::Cudnn: return "cudnn";
    default: return "opset";
  }
}

const char* attention_layout_name(AttentionLayout l) {
  switch (l) {
    case AttentionLayout::Legacy: return "legacy";
    case AttentionLayout::Ragged: return "ragged";
    case AttentionLayout::Split: return "split";
    default: return "auto";
  }
}

void BlockProfile::mark(cudaStream_t st, const char* category) {
  cudaEvent_t e;
  AVDIT_CUDA_CHECK(cudaEventCreate(&e));
  AVDIT_CUDA_CHECK(cudaEventRecord(e, st));
  marks.emplace_back(category, e);
}

BlockProfile::~BlockProfile() {
  for (auto& [name, e] : marks) cudaEventDestroy(e);
}

namespace {

constexpr int64_t kAlign = 256;
int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

Tensor i32_host(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I32);
  for (size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
  return t;
}

Tensor u8_host(const std::vector<uint8_t>& v) {
  return Tensor::from_data({static_cast<int64_t>(v.size())}, DType::U8, v.data());
}

Mat mat(const Tensor& t) {
  const int64_t cols = t.size(-1);
  return Mat{t.raw(), cols ? t.numel() / cols : 0, cols, t.dtype()};
}
Mat mat(const void* p, int64_t rows, int64_t cols, DType dt) { return Mat{p, rows, cols, dt}; }

// Host copy of a device tensor as F32 (dumps only: synchronises).
Tensor host_f32(Device& dev, const Tensor& t) { return to_host(dev, t).to_f32(); }

void put(TensorMap* dump, Device& dev, const std::string& name, const Tensor& t) {
  if (dump) (*dump)[name] = host_f32(dev, t);
}

}  // namespace

H3CudaModel::H3CudaModel(Device& dev, const mh::H3Config& config, Precision precision)
    : dev_(dev), config_(config), precision_(precision), gemm_(dev) {
  AVDIT_REQUIRE(config.attention_head_dim == 128, "H3 CUDA: attention_head_dim {} (the kernels need 128)",
                config.attention_head_dim);
  AVDIT_REQUIRE(config.rope_dim() <= config.attention_head_dim, "H3 CUDA: RoPE dims {} exceed the head dim {}",
                config.rope_dim(), config.attention_head_dim);
}

Tensor H3CudaModel::upload(const Tensor& host, bool keep_f32) {
  AVDIT_REQUIRE(host.defined(), "H3 CUDA: a weight tensor is missing");
  const DType target = (precision_ == Precision::F32 || keep_f32) ? DType::F32 : DType::BF16;
  Tensor t = to_device(dev_, host.to(target));
  weight_bytes_ += t.nbytes();
  return t;
}

H3CudaModel::H3CudaModel(Device& dev, const mh::H3Config& config, const mh::H3Weights& h, Precision precision)
    : H3CudaModel(dev, config, precision) {
  // fp32 islands of the reference's bf16 model: patch projections, time embedder, output heads.
  w_.video_patch_proj_weight = upload(h.video_patch_proj_weight, true);
  w_.video_patch_proj_bias = upload(h.video_patch_proj_bias, true);
  w_.audio_patch_proj_weight = upload(h.audio_patch_proj_weight, true);
  w_.audio_patch_proj_bias = upload(h.audio_patch_proj_bias, true);
  w_.condition_proj_weight = upload(h.condition_proj_weight, false);
  w_.condition_proj_bias = upload(h.condition_proj_bias, false);
  if (config.curve_variant()) {
    w_.adaln_t_table_host = h.adaln_t_table.to_f32().clone();
  } else {
    w_.time_proj_in_weight = upload(h.time_proj_in_weight, true);
    w_.time_proj_in_bias = upload(h.time_proj_in_bias, true);
    w_.time_proj_out_weight = upload(h.time_proj_out_weight, true);
    w_.time_proj_out_bias = upload(h.time_proj_out_bias, true);
  }
  w_.rope_inv_freq_host = h.rope_inv_freq.to_f32().clone();
  auto block = [&](const mh::BlockWeights& b) {
    DeviceBlock d;
    d.norm1 = upload(b.norm1, false);
    d.norm2 = upload(b.norm2, false);
    d.qkv_proj = upload(b.qkv_proj, false);
    d.q_norm = upload(b.q_norm, false);
    d.k_norm = upload(b.k_norm, false);
    d.out_proj = upload(b.out_proj, false);
    d.fc1 = upload(b.fc1, false);
    d.fc2 = upload(b.fc2, false);
    if (b.adaln_weight.defined()) {
      d.adaln_weight = upload(b.adaln_weight, false);
      d.adaln_bias = upload(b.adaln_bias, false);
    }
    return d;
  };
  for (const auto& b : h.refiner_blocks) w_.refiner_blocks.push_back(block(b));
  w_.refiner_final_norm = upload(h.refiner_final_norm, false);
  for (const auto& b : h.blocks) w_.blocks.push_back(block(b));
  w_.final_norm = upload(h.final_norm, false);
  w_.final_adaln_weight = upload(h.final_adaln_weight, false);
  w_.final_adaln_bias = upload(h.final_adaln_bias, false);
  w_.video_out_weight = upload(h.video_out_weight, true);
  w_.video_out_bias = upload(h.video_out_bias, true);
  w_.audio_out_weight = upload(h.audio_out_weight, true);
  w_.audio_out_bias = upload(h.audio_out_bias, true);
}

std::unique_ptr<H3CudaModel> H3CudaModel::random(Device& dev, const mh::H3Config& config, Precision precision,
                                                 uint64_t seed) {
  AVDIT_REQUIRE(!config.curve_variant(), "H3 CUDA random weights: the full (time_embedder) variant only");
  std::unique_ptr<H3CudaModel> m(new H3CudaModel(dev, config, precision));
  const mh::H3Config& c = config;
  uint64_t counter = seed * 1000003ull;
  auto gen = [&](Shape shape, bool keep_f32, float mean, float std) {
    const DType dt = (precision == Precision::F32 || keep_f32) ? DType::F32 : DType::BF16;
    Tensor t = cuda_empty(dev, std::move(shape), dt);
    fill_normal(dev.stream(), device_ptr(t), dt == DType::BF16, t.numel(), ++counter, mean, std);
    AVDIT_CUDA_CHECK(cudaGetLastError());
    m->weight_bytes_ += t.nbytes();
    return t;
  };
  auto proj = [&](int64_t out, int64_t in, bool keep_f32) {
    return gen({out, in}, keep_f32, 0.f, 1.f / std::sqrt(static_cast<float>(in)));
  };
  const int64_t H = c.hidden_size, I = c.inner_dim(), F = c.ffn_hidden_size, Dt = c.time_embed_dim;
  DeviceWeights& w = m->w_;
  w.video_patch_proj_weight = proj(H, c.video_patch_dim(), true);
  w.video_patch_proj_bias = gen({H}, true, 0.f, 0.02f);
  w.audio_patch_proj_weight = proj(H, c.audio_latents_dim, true);
  w.audio_patch_proj_bias = gen({H}, true, 0.f, 0.02f);
  w.condition_proj_weight = proj(H, c.text_dim, false);
  w.condition_proj_bias = gen({H}, false, 0.f, 0.02f);
  w.time_proj_in_weight = gen({c.time_embed_hidden_size, c.timestep_input_dim}, true, 0.f,
                              4.f / std::sqrt(static_cast<float>(c.timestep_input_dim)));
  w.time_proj_in_bias = gen({c.time_embed_hidden_size}, true, 0.f, 0.1f);
  w.time_proj_out_weight = gen({Dt, c.time_embed_hidden_size}, true, 0.f,
                               0.5f / std::sqrt(static_cast<float>(c.time_embed_hidden_size)));
  w.time_proj_out_bias = gen({Dt}, true, 0.f, 0.1f);
  std::vector<float> inv(c.rope_inv_freq_len);
  for (int64_t j = 0; j < c.rope_inv_freq_len; ++j)
    inv[j] = 1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / static_cast<float>(2 * c.rope_inv_freq_len));
  w.rope_inv_freq_host = Tensor::from_floats(inv, {c.rope_inv_freq_len});
  auto block = [&](bool adaln) {
    DeviceBlock b;
    b.norm1 = gen({H}, false, 1.f, 0.1f);
    b.norm2 = gen({H}, false, 1.f, 0.1f);
    b.qkv_proj = proj(3 * I, H, false);
    b.q_norm = gen({c.attention_head_dim}, false, 1.f, 0.1f);
    b.k_norm = gen({c.attention_head_dim}, false, 1.f, 0.1f);
    b.out_proj = proj(H, I, false);
    b.fc1 = proj(2 * F, H, false);
    b.fc2 = proj(H, F, false);
    if (adaln) {
      b.adaln_weight = gen({c.adaln_out_features, Dt}, false, 0.f, 0.5f / std::sqrt(static_cast<float>(Dt)));
      b.adaln_bias = gen({c.adaln_out_features}, false, 0.f, 0.1f);
    }
    return b;
  };
  for (int64_t r = 0; r < c.token_refiner_num_layers; ++r) w.refiner_blocks.push_back(block(false));
  w.refiner_final_norm = gen({H}, false, 1.f, 0.1f);
  for (int64_t i = 0; i < c.num_layers; ++i) w.blocks.push_back(block(true));
  w.final_norm = gen({H}, false, 1.f, 0.1f);
  w.final_adaln_weight = gen({c.final_adaln_out_features, Dt}, false, 0.f, 0.5f / std::sqrt(static_cast<float>(Dt)));
  w.final_adaln_bias = gen({c.final_adaln_out_features}, false, 0.f, 0.1f);
  w.video_out_weight = proj(c.video_patch_dim(), H, true);
  w.video_out_bias = gen({c.video_patch_dim()}, true, 0.f, 0.02f);
  w.audio_out_weight = proj(c.audio_latents_dim, H, true);
  w.audio_out_bias = gen({c.audio_latents_dim}, true, 0.f, 0.02f);
  dev.synchronize();
  return m;
}

void H3CudaModel::ensure_arena(int64_t S) {
  if (S <= arena_rows_) return;
  const mh::H3Config& c = config_;
  const int64_t e = dtype_nbytes(act_dtype(), 1);
  const int64_t H = c.hidden_size, I = c.inner_dim(), F = c.ffn_hidden_size;
  int64_t off = 0;
  auto take = [&](int64_t bytes) {
    const int64_t o = off;
    off += align_up(bytes);
    return o;
  };
  off_x_ = take(S * H * e);
  off_h_ = take(S * H * e);
  off_t_ = take(S * H * e);
  off_core_ = take(S * I * e);
  // qkv + q + k + v (6 I), or fc1 + swiglu (3 F), or the fp32 final-layer input / patch
  // projections (H floats per row): never live at the same time.
  off_big_ = take(std::max({6 * I * e, 3 * F * e, H * int64_t{4}}) * S + 4 * kAlign);
  off_heads_ = take(S * (c.video_patch_dim() + c.audio_latents_dim) * 4 + kAlign);
  arena_.reset();
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(off));
  if (err != cudaSuccess)
    throw RuntimeFailure(fmt::format("H3 CUDA: out of GPU memory for the activation arena of {} rows ({} bytes): {}",
                                     S, off, cudaGetErrorString(err)));
  arena_ = std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
  arena_rows_ = S;
  arena_bytes_ = off;
  ++arena_generation_;
}

Tensor H3CudaModel::slice(int64_t offset_bytes, Shape shape, DType dtype) const {
  void* p = static_cast<char*>(arena_.get()) + offset_bytes;
  return Tensor::wrap(std::shared_ptr<const void>(arena_), p, std::move(shape), dtype, avdit::Device::CUDA);
}

const H3CudaModel::Tables& H3CudaModel::tables_for(const std::vector<float>& unique) {
  std::vector<uint32_t> key(unique.size());
  std::memcpy(key.data(), unique.data(), unique.size() * sizeof(float));
  auto it = tables_.find(key);
  if (it != tables_.end()) return it->second;
  if (tables_.size() >= 8) {  // a sampler walks new timesteps: keep the cache small
    for (auto& [k, t] : tables_) table_bytes_ -= t.storage.nbytes();
    tables_.clear();
  }
  const mh::H3Config& c = config_;
  const auto M = static_cast<int64_t>(unique.size());
  const auto n_blocks = static_cast<int64_t>(w_.blocks.size());
  Tables t = table_views(
      cuda_empty(dev_, {M * (n_blocks * c.adaln_out_features + c.final_adaln_out_features)}, act_dtype()), M);
  // 3. Time embedding in fp32 (the reference's island), then silu -> adaLN input.
  if (c.curve_variant()) {
    mh::H3Weights hw;
    hw.adaln_t_table = w_.adaln_t_table_host;
    t.adaln_input = to_device(dev_, mh::embed_timesteps(hw, c, unique).adaln_input);
  } else {
    const Tensor e = to_device(dev_, mh::timestep_sinusoid(unique, c.timestep_input_dim));
    Tensor hidden = cuda_empty(dev_, {M, c.time_embed_hidden_size}, DType::F32);
    gemm_.run(mat(e), mat(w_.time_proj_in_weight), w_.time_proj_in_bias.raw(), device_ptr(hidden), DType::F32);
    hidden = silu(dev_, hidden);
    t.t_emb = cuda_empty(dev_, {M, c.time_embed_dim}, DType::F32);
    gemm_.run(mat(hidden), mat(w_.time_proj_out_weight), w_.time_proj_out_bias.raw(), device_ptr(t.t_emb),
              DType::F32);
    t.adaln_input = silu(dev_, t.t_emb);
  }
  // silu(t_emb) is cast to the activation dtype before the adaLN linears.
  const Tensor in = act_dtype() == DType::F32 ? t.adaln_input : cast(dev_, t.adaln_input, act_dtype());
  for (int64_t i = 0; i < n_blocks; ++i) {
    const DeviceBlock& b = w_.blocks[i];
    gemm_.run(mat(in), mat(b.adaln_weight), b.adaln_bias.raw(), device_ptr(t.block[i]), act_dtype());
  }
  gemm_.run(mat(in), mat(w_.final_adaln_weight), w_.final_adaln_bias.raw(), device_ptr(t.final), act_dtype());
  table_bytes_ += t.storage.nbytes();
  return tables_.emplace(std::move(key), std::move(t)).first->second;
}

H3CudaModel::Tables H3CudaModel::table_views(const Tensor& storage, int64_t M) const {
  const int64_t A = config_.adaln_out_features, Af = config_.final_adaln_out_features;
  const auto n_blocks = static_cast<int64_t>(w_.blocks.size());
  AVDIT_REQUIRE(storage.numel() == M * (n_blocks * A + Af), "H3 CUDA: adaLN table storage of {} elements for {} rows",
                storage.numel(), M);
  Tables t;
  t.storage = storage;
  for (int64_t i = 0; i < n_blocks; ++i) t.block.push_back(storage.slice_rows(i * M * A, (i + 1) * M * A).reshape({M, A}));
  t.final = storage.slice_rows(n_blocks * M * A, storage.numel()).reshape({M, Af});
  return t;
}

void H3CudaModel::clear_adaln_cache() {
  tables_.clear();
  table_bytes_ = 0;
}

DeviceProblem H3CudaModel::prepare(const mh::PackedLayout& l, const mh::PackedTimesteps& ts) {
  DeviceProblem p = describe(l, ts);
  p.mod_rows = to_device(dev_, i32_host(p.mod_rows_host));
  p.inverse = to_device(dev_, i32_host(ts.inverse));
  return p;
}

DeviceProblem H3CudaModel::describe(const mh::PackedLayout& l, const mh::PackedTimesteps& ts) {
  const int64_t S = l.seq_len;
  AVDIT_REQUIRE(static_cast<int64_t>(ts.inverse.size()) == S && static_cast<int64_t>(l.token_tags.size()) == S &&
                    static_cast<int64_t>(l.positions.size()) == 3 * S,
                "H3 CUDA: layout of {} rows with {} timestep rows, {} tags, {} positions", S, ts.inverse.size(),
                l.token_tags.size(), l.positions.size() / 3);
  AVDIT_REQUIRE(S < (int64_t{1} << 31), "H3 CUDA: {} rows exceed the 32-bit row indices", S);
  DeviceProblem p = layout_device_part(l);  // the layout's device tensors (shared handles), then per call:
  p.seq_len = S;
  p.used_len = l.used_len;
  p.text_len = l.text_len;
  p.n_img = static_cast<int64_t>(l.img_pos.size());
  p.n_audio = static_cast<int64_t>(l.audio_pos.size());
  p.unique_timesteps = ts.unique;
  p.mod_rows_host = mh::adaln_rows(l, ts);
  p.inverse_host = ts.inverse;
  return p;
}

const DeviceProblem& H3CudaModel::layout_device_part(const mh::PackedLayout& l) {
  const int64_t S = l.seq_len;
  const AttentionLayout planned = resolve_layout(l.cu_seqlens);
  if (gemm_candidates_ > 0 && precision_ == Precision::BF16 && S >= kTuneMinRows) tune_gemms(S);
  if (!layout_parts_ || !layout_parts_->matches(l, planned)) {
    layout_parts_.reset();  // release the old tables first
    LayoutParts c{l, planned, {}};
    DeviceProblem& d = c.device;
    d.attention = plan_attention(dev_, l.cu_seqlens, planned);
    // 4. RoPE tables from the float32-cast positions and the stored inv_freq (fp32 island); the
    // bf16 reference casts its cos / sin cache to bf16.
    const mh::RopeTables rope = mh::rope_tables(l.positions, w_.rope_inv_freq_host);
    const models::Rounding rnd{precision_ == Precision::BF16};
    d.rope_cos = to_device(dev_, rnd(rope.cos.clone()));
    d.rope_sin = to_device(dev_, rnd(rope.sin.clone()));
    d.text_pos = to_device(dev_, i32_host(l.text_pos));
    d.img_pos = to_device(dev_, i32_host(l.img_pos));
    d.audio_pos = to_device(dev_, i32_host(l.audio_pos));
    d.update_mask = to_device(dev_, u8_host(l.update_mask));
    d.update_audio_mask = to_device(dev_, u8_host(l.update_audio_mask));
    layout_parts_ = std::move(c);
    ++layout_generation_;
  }
  return layout_parts_->device;
}

bool H3CudaModel::LayoutParts::matches(const mh::PackedLayout& l, AttentionLayout planned_layout) const {
  return planned == planned_layout && layout.cu_seqlens == l.cu_seqlens && layout.positions == l.positions &&
         layout.text_pos == l.text_pos && layout.img_pos == l.img_pos && layout.audio_pos == l.audio_pos &&
         layout.update_mask == l.update_mask && layout.update_audio_mask == l.update_audio_mask;
}

void H3CudaModel::tune_gemms(int64_t S) {
  if (w_.blocks.empty() || S == 0) return;
  ensure_arena(S);
  const mh::H3Config& c = config_;
  const int64_t H = c.hidden_size, I = c.inner_dim(), F = c.ffn_hidden_size, e = 2;  // bf16 only
  const cudaStream_t st = dev_.stream();
  char* big = static_cast<char*>(arena_.get()) + off_big_;
  // Non-zero operands (the tensor cores' power draw, and so their clock, depends on the data).
  auto fill = [&](void* p, int64_t n, uint64_t seed) { fill_normal(st, p, true, n, seed, 0.f, 1.f); };
  void* h = static_cast<char*>(arena_.get()) + off_h_;
  void* core = static_cast<char*>(arena_.get()) + off_core_;
  void* t = static_cast<char*>(arena_.get()) + off_t_;
  void* gact = big + align_up(S * 2 * F * e);
  fill(h, S * H, 91);
  fill(core, S * I, 92);
  fill(gact, S * F, 93);
  AVDIT_CUDA_CHECK_LAUNCH();
  const DeviceBlock& b = w_.blocks[0];
  const int n = gemm_candidates_;
  gemm_.tune(mat(h, S, H, DType::BF16), mat(b.qkv_proj), big, DType::BF16, n);
  gemm_.tune(mat(core, S, I, DType::BF16), mat(b.out_proj), t, DType::BF16, n);
  gemm_.tune(mat(h, S, H, DType::BF16), mat(b.fc1), big, DType::BF16, n);
  gemm_.tune(mat(gact, S, F, DType::BF16), mat(b.fc2), t, DType::BF16, n);
}

AttentionLayout H3CudaModel::resolve_layout(const std::vector<int64_t>& cu) {
  if (layout_ != AttentionLayout::Auto) return layout_;
  // Only the bf16 cuDNN core cares, and only a problem big enough to time reliably.
  const int64_t S = cu.empty() ? 0 : cu.back();
  if (precision_ != Precision::BF16 || attention_ != AttentionImpl::Cudnn || S < kTuneMinRows || cu.size() < 2 ||
      cu[1] == 0)
    return AttentionLayout::Split;
  auto it = chosen_layouts_.find(cu);
  if (it != chosen_layouts_.end()) return it->second;
  // Time both plans once on arena scratch (bench/NOTES.md: on the H200 with cuDNN 9.14 the dense
  // graph was 4% faster at 19,456 rows, the ragged one 2.6% faster at 40,128), keep the faster.
  ensure_arena(S);
  const mh::H3Config& c = config_;
  const int64_t heads = c.num_attention_heads, dh = c.attention_head_dim, I = c.inner_dim(), e = 2;
  char* big = static_cast<char*>(arena_.get()) + off_big_;
  void* q = big + align_up(S * 3 * I * e);
  void* k = static_cast<char*>(q) + align_up(S * I * e);
  void* v = static_cast<char*>(k) + align_up(S * I * e);
  const cudaStream_t st = dev_.stream();
  fill_normal(st, q, true, S * I, 94, 0.f, 1.f);
  fill_normal(st, k, true, S * I, 95, 0.f, 1.f);
  fill_normal(st, v, true, S * I, 96, 0.f, 1.f);
  AVDIT_CUDA_CHECK_LAUNCH();
  const Tensor qt = Tensor::wrap(arena_, q, {S, heads, dh}, DType::BF16, avdit::Device::CUDA);
  const Tensor kt = Tensor::wrap(arena_, k, {S, heads, dh}, DType::BF16, avdit::Device::CUDA);
  const Tensor vt = Tensor::wrap(arena_, v, {S, heads, dh}, DType::BF16, avdit::Device::CUDA);
  cudaEvent_t e0, e1;
  AVDIT_CUDA_CHECK(cudaEventCreate(&e0));
  AVDIT_CUDA_CHECK(cudaEventCreate(&e1));
  AttentionLayout best = AttentionLayout::Split;
  float best_ms = -1;
  for (AttentionLayout l : {AttentionLayout::Split, AttentionLayout::Ragged}) {
    const AttentionPlan plan = plan_attention(dev_, cu, l);
    attend(qt, kt, vt, plan, S);  // builds the graphs (untimed)
    AVDIT_CUDA_CHECK(cudaEventRecord(e0, st));
    for (int r = 0; r < 2; ++r) attend(qt, kt, vt, plan, S);
    AVDIT_CUDA_CHECK(cudaEventRecord(e1, st));
    AVDIT_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    AVDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (attention_ != AttentionImpl::Cudnn) break;  // cuDNN refused: the flash kernel takes any plan
    layout_timings_.push_back({S, l, ms / 2});
    if (best_ms < 0 || ms < best_ms) best_ms = ms, best = l;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  chosen_layouts_[cu] = best;
  return best;
}

AttentionPlan plan_attention(Device& dev, const std::vector<int64_t>& cu, AttentionLayout layout) {
  AVDIT_REQUIRE(cu.size() >= 2 && cu.front() == 0, "H3 CUDA: cu_seqlens must start at 0 with >= 2 entries");
  for (size_t i = 1; i < cu.size(); ++i)
    AVDIT_REQUIRE(cu[i] >= cu[i - 1], "H3 CUDA: cu_seqlens decreases at entry {} ({} < {})", i, cu[i], cu[i - 1]);
  const int64_t S = cu.back();
  AttentionPlan p;
  p.layout = layout == AttentionLayout::Auto ? AttentionLayout::Split : layout;
  p.cu = to_device(dev, i32_host(cu));
  if (layout == AttentionLayout::Legacy) {
    p.tail_cu = p.cu;
    p.tail_max = S;
    return p;
  }
  size_t first = 0;  // documents [first, n) go to the ragged graph
  if (layout != AttentionLayout::Ragged) {
    p.dense_rows = cu[1];
    first = 1;
  }
  std::vector<int64_t> tail = {0};
  for (size_t i = first; i + 1 < cu.size(); ++i) {
    const int64_t n = cu[i + 1] - cu[i];
    if (n == 0) continue;  // an empty document launches nothing useful (the bench's {0, S, S})
    tail.push_back(tail.back() + n);
    p.tail_max = std::max(p.tail_max, n);
  }
  if (tail.size() > 1) p.tail_cu = to_device(dev, i32_host(tail));
  return p;
}

Tensor H3CudaModel::attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionPlan& plan, int64_t S) {
  const mh::H3Config& c = config_;
  const int64_t heads = c.num_attention_heads, dh = c.attention_head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  if (precision_ == Precision::F32 || attention_ == AttentionImpl::OpSet)
    return attention(dev_, q, k, v, scale, plan.cu);
  const Tensor core = slice(off_core_, {S, heads, dh}, act_dtype());
  if (attention_ == AttentionImpl::Cudnn && cudnn_attention_available(dev_, q, k, v)) {
    // Rows [r0, r0 + n) of q, k, v and the core as [n, heads, dh] views.
    auto rows = [](const Tensor& t, int64_t r0, int64_t n) { return t.slice_rows(r0, r0 + n); };
    try {
      // No log-sum-exp output: H3 has no sinks (what torch's inference SDPA runs as well).
      if (plan.dense_rows > 0) {
        const int64_t n = plan.dense_rows;
        SdpaOut into{rows(core, 0, n), {}};
        cudnn_sdpa(dev_, rows(q, 0, n), rows(k, 0, n), rows(v, 0, n), scale, {}, &into, nullptr, /*stats=*/false);
      }
      if (plan.tail_cu.defined()) {
        const int64_t r0 = plan.dense_rows, n = S - r0;
        SdpaOut into{rows(core, r0, n), {}};
        cudnn_sdpa(dev_, rows(q, r0, n), rows(k, r0, n), rows(v, r0, n), scale, plan.tail_cu, &into, nullptr,
                   /*stats=*/false, plan.tail_max);
      }
      return core;
    } catch (const RuntimeFailure& e) {
      // cuDNN refused this shape: our kernel from now on (said once, on stderr).
      std::fprintf(stderr, "H3 CUDA: cuDNN SDPA refused [%ld, %ld, %ld] (%s); using the flash kernel\n",
                   static_cast<long>(S), static_cast<long>(heads), static_cast<long>(dh), e.what());
      attention_ = AttentionImpl::Flash;
    }
  }
  flash_attention_bf16(dev_.stream(), q.raw(), k.raw(), v.raw(), device_ptr(core), std::as_const(plan.cu).data<int32_t>(),
                       plan.cu.numel(), S, heads, scale);
  AVDIT_CUDA_CHECK_LAUNCH();
  return core;
}

DeviceOutput H3CudaModel::forward_device(const DeviceProblem& p, const Tensor& text_refined, const Tensor& video_rows,
                                         const Tensor& audio_rows, TensorMap* dump, BlockProfile* profile) {
  const mh::H3Config& c = config_;
  const int64_t S = p.seq_len, H = c.hidden_size;
  require_cuda(text_refined, "H3 forward text_refined");
  require_cuda(video_rows, "H3 forward video_rows");
  require_cuda(audio_rows, "H3 forward audio_rows");
  AVDIT_REQUIRE(text_refined.ndim() == 2 && text_refined.size(0) == p.text_len && text_refined.size(1) == H &&
                    (text_refined.dtype() == act_dtype() || text_refined.dtype() == DType::F32),
                "H3 CUDA forward: text_refined must be [{}, {}] F32 or {}, found {} {}", p.text_len, H,
                dtype_name(act_dtype()), dtype_name(text_refined.dtype()), text_refined.shape_str());
  AVDIT_REQUIRE(video_rows.ndim() == 2 && video_rows.size(0) == p.n_img && video_rows.size(1) == c.video_patch_dim() &&
                    video_rows.dtype() == DType::F32,
                "H3 CUDA forward: video rows must be F32 [{}, {}], found {} {}", p.n_img, c.video_patch_dim(),
                dtype_name(video_rows.dtype()), video_rows.shape_str());
  AVDIT_REQUIRE(audio_rows.ndim() == 2 && audio_rows.size(0) == p.n_audio &&
                    audio_rows.size(1) == c.audio_latents_dim && audio_rows.dtype() == DType::F32,
                "H3 CUDA forward: audio rows must be F32 [{}, {}], found {} {}", p.n_audio, c.audio_latents_dim,
                dtype_name(audio_rows.dtype()), audio_rows.shape_str());
  const Tables& tab = tables_for(p.unique_timesteps);
  ensure_arena(S);
  DeviceOutput o{cuda_empty(dev_, {p.n_img, c.video_patch_dim()}, DType::F32),
                 cuda_empty(dev_, {p.n_audio, c.audio_latents_dim}, DType::F32)};
  enqueue_forward(p, tab, text_refined.raw(), text_refined.dtype() == act_dtype(), video_rows.raw(), audio_rows.raw(),
                  static_cast<float*>(device_ptr(o.video_out)), static_cast<float*>(device_ptr(o.audio_out)), dump,
                  profile);
  return o;
}

void H3CudaModel::enqueue_forward(const DeviceProblem& p, const Tables& tab, const void* text, bool text_act,
                                  const void* video, const void* audio, float* video_out, float* audio_out,
                                  TensorMap* dump, BlockProfile* profile) {
  const mh::H3Config& c = config_;
  const int64_t S = p.seq_len, H = c.hidden_size, I = c.inner_dim(), F = c.ffn_hidden_size;
  const int64_t heads = c.num_attention_heads, dh = c.attention_head_dim;
  const bool bf = precision_ == Precision::BF16;
  const DType act = act_dtype();
  const cudaStream_t st = dev_.stream();
  const Tensor x = slice(off_x_, {S, H}, act), h = slice(off_h_, {S, H}, act), t = slice(off_t_, {S, H}, act);
  char* big = static_cast<char*>(arena_.get()) + off_big_;

  // 2. Packed input: text rows, fp32 patch projections (rounded to the activation dtype when
  // written into the sequence); pad rows zero.
  AVDIT_CUDA_CHECK(cudaMemsetAsync(device_ptr(x), 0, static_cast<size_t>(x.nbytes()), st));
  scatter_rows(st, bf, text, text_act, std::as_const(p.text_pos).data<int32_t>(), device_ptr(x), p.text_len, H);
  gemm_.run(mat(video, p.n_img, c.video_patch_dim(), DType::F32), mat(w_.video_patch_proj_weight),
            w_.video_patch_proj_bias.raw(), big, DType::F32);
  scatter_rows(st, bf, big, false, std::as_const(p.img_pos).data<int32_t>(), device_ptr(x), p.n_img, H);
  gemm_.run(mat(audio, p.n_audio, c.audio_latents_dim, DType::F32), mat(w_.audio_patch_proj_weight),
            w_.audio_patch_proj_bias.raw(), big, DType::F32);
  scatter_rows(st, bf, big, false, std::as_const(p.audio_pos).data<int32_t>(), device_ptr(x), p.n_audio, H);
  AVDIT_CUDA_CHECK_LAUNCH();
  put(dump, dev_, "hidden_embed", x);
  if (dump) {
    if (tab.t_emb.defined()) put(dump, dev_, "t_emb", tab.t_emb);
    put(dump, dev_, "adaln_input", tab.adaln_input);
    const Tensor cs = host_f32(dev_, p.rope_cos), sn = host_f32(dev_, p.rope_sin);
    (*dump)["rope_cos_sin_cache"] = mh::rope_cos_sin_cache({cs, sn});
  }

  const int* rows = std::as_const(p.mod_rows).data<int32_t>();
  const int64_t tstride = 6 * H;  // the [M, 18 H] table viewed as [3 M, 6 H]
  auto slice_of = [&](const Tensor& table, int s) {
    return TableSlice{static_cast<const char*>(table.raw()) + s * H * dtype_nbytes(act, 1), tstride};
  };
  const float eps = static_cast<float>(c.norm_eps), qk_eps = static_cast<float>(c.qk_norm_eps);
  const int64_t n_blocks = static_cast<int64_t>(w_.blocks.size());
  const int64_t half = c.rope_dim() / 2;
  const int64_t e = dtype_nbytes(act, 1);

  // The first block's attn_in: norm1 + modulation of the embedded sequence.
  if (n_blocks > 0) {
    ResidNormArgs a;
    a.x = device_ptr(x);
    a.w = w_.blocks[0].norm1.raw();
    a.eps = eps;
    a.shift = slice_of(tab.block[0], 0);
    a.scale = slice_of(tab.block[0], 1);
    a.row2 = rows;
    a.out = device_ptr(h);
    a.S = S;
    a.H = H;
    resid_norm_modulate(st, bf, a);
    AVDIT_CUDA_CHECK_LAUNCH();
  }

  for (int64_t i = 0; i < n_blocks; ++i) {
    const DeviceBlock& b = w_.blocks[i];
    const bool d0 = dump && i == 0;
    const bool prof = profile && profile->block == i;
    if (prof) profile->mark(st, "start");
    if (d0) {
      // norm1 alone (the fused kernel never materialises it): dump-only extra pass.
      Tensor n1 = cuda_empty(dev_, {S, H}, act);
      ResidNormArgs a;
      a.x = device_ptr(x);
      a.w = b.norm1.raw();
      a.eps = eps;
      a.out = device_ptr(n1);
      a.S = S;
      a.H = H;
      resid_norm_modulate(st, bf, a);
      put(dump, dev_, "block0_norm1", n1);
      const Tensor& mod = tab.block[0];
      put(dump, dev_, "block0_adaln_linear_out", mod);
      const Tensor mh_ = host_f32(dev_, mod);
      const int64_t M = static_cast<int64_t>(p.unique_timesteps.size());
      static constexpr const char* kNames[6] = {"shift_msa", "scale_msa", "gate_msa", "shift_mlp", "scale_mlp", "gate_mlp"};
      for (int s = 0; s < 6; ++s) {
        Tensor sl = Tensor::empty({3 * M, H}, DType::F32);
        for (int64_t j = 0; j < 3 * M; ++j) std::memcpy(sl.f32() + j * H, mh_.f32() + j * tstride + s * H, H * 4);
        (*dump)[std::string("block0_") + kNames[s]] = sl;
      }
      put(dump, dev_, "block0_attn_in", h);
    }
    // Attention: qkv GEMM (grouped rows as stored), fused q/k norm + RoPE + split, attention, out_proj.
    void* qkv = big;
    void* q = big + align_up(S * 3 * I * e);
    void* k = static_cast<char*>(q) + align_up(S * I * e);
    void* v = static_cast<char*>(k) + align_up(S * I * e);
    gemm_.run(mat(h), mat(b.qkv_proj), nullptr, qkv, act);
    if (prof) profile->mark(st, "gemm");
    if (d0) {
      // block0_qkv in the fixture's regrouped order (Q_all | K_all | V_all), and q/k before RoPE.
      const Tensor g = host_f32(dev_, slice(off_big_, {S, heads, 3, dh}, act));
      Tensor qkv_h = Tensor::empty({S, 3 * I}, DType::F32);
      for (int64_t s = 0; s < S; ++s)
        for (int64_t hd = 0; hd < heads; ++hd)
          for (int part = 0; part < 3; ++part)
            std::memcpy(qkv_h.f32() + s * 3 * I + part * I + hd * dh, g.f32() + ((s * heads + hd) * 3 + part) * dh,
                        dh * 4);
      (*dump)["block0_qkv"] = qkv_h;
      qk_norm_rope(st, bf, qkv, b.q_norm.raw(), b.k_norm.raw(), qk_eps, nullptr, nullptr, half, false, q, k, v, S,
                   heads, dh);
      put(dump, dev_, "block0_q_normed", Tensor::wrap(arena_, q, {S, heads, dh}, act, avdit::Device::CUDA));
      put(dump, dev_, "block0_k_normed", Tensor::wrap(arena_, k, {S, heads, dh}, act, avdit::Device::CUDA));
    }
    qk_norm_rope(st, bf, qkv, b.q_norm.raw(), b.k_norm.raw(), qk_eps, std::as_const(p.rope_cos).data<float>(),
                 std::as_const(p.rope_sin).data<float>(), half, true, q, k, v, S, heads, dh);
    AVDIT_CUDA_CHECK_LAUNCH();
    if (prof) profile->mark(st, "rest");
    const Tensor qt = Tensor::wrap(arena_, q, {S, heads, dh}, act, avdit::Device::CUDA);
    const Tensor kt = Tensor::wrap(arena_, k, {S, heads, dh}, act, avdit::Device::CUDA);
    const Tensor vt = Tensor::wrap(arena_, v, {S, heads, dh}, act, avdit::Device::CUDA);
    if (d0) {
      put(dump, dev_, "block0_q_rope", qt);
      put(dump, dev_, "block0_k_rope", kt);
    }
    const Tensor core = attend(qt, kt, vt, p.attention, S);
    if (prof) profile->mark(st, "attention");
    if (d0) put(dump, dev_, "block0_attn_core", core.reshape({S, I}));
    gemm_.run(mat(core.raw(), S, I, act), mat(b.out_proj), nullptr, device_ptr(t), act);
    if (prof) profile->mark(st, "gemm");
    if (d0) put(dump, dev_, "block0_attn_out", t);
    {  // x += gate_msa * attn; h = norm2(x) * (1 + scale_mlp) + shift_mlp
      ResidNormArgs a;
      a.x = device_ptr(x);
      a.f = t.raw();
      a.gate = slice_of(tab.block[i], 2);
      a.row = rows;
      a.w = b.norm2.raw();
      a.eps = eps;
      a.shift = slice_of(tab.block[i], 3);
      a.scale = slice_of(tab.block[i], 4);
      a.row2 = rows;
      a.out = device_ptr(h);
      a.S = S;
      a.H = H;
      resid_norm_modulate(st, bf, a);
      AVDIT_CUDA_CHECK_LAUNCH();
    }
    if (prof) profile->mark(st, "rest");
    if (d0) put(dump, dev_, "block0_mlp_in", h);
    // MLP: fc1 -> SwiGLU -> fc2.
    void* u = big;
    void* gact = big + align_up(S * 2 * F * e);
    gemm_.run(mat(h), mat(b.fc1), nullptr, u, act);
    if (prof) profile->mark(st, "gemm");
    swiglu(st, bf, u, gact, S, F);
    AVDIT_CUDA_CHECK_LAUNCH();
    if (prof) profile->mark(st, "rest");
    gemm_.run(mat(gact, S, F, act), mat(b.fc2), nullptr, device_ptr(t), act);
    if (prof) profile->mark(st, "gemm");
    if (d0) put(dump, dev_, "block0_mlp_out", t);
    {  // x += gate_mlp * mlp; then the next block's attn_in, or the final layer's input
      ResidNormArgs a;
      a.x = device_ptr(x);
      a.f = t.raw();
      a.gate = slice_of(tab.block[i], 5);
      a.row = rows;
      a.S = S;
      a.H = H;
      if (i + 1 < n_blocks) {
        a.w = w_.blocks[i + 1].norm1.raw();
        a.eps = eps;
        a.shift = slice_of(tab.block[i + 1], 0);
        a.scale = slice_of(tab.block[i + 1], 1);
        a.row2 = rows;
        a.out = device_ptr(h);
      } else {
        // 6. Final layer: no modality split (row = timestep index), final_norm_eps, fp32 out.
        a.w = w_.final_norm.raw();
        a.eps = static_cast<float>(c.final_norm_eps);
        a.shift = TableSlice{tab.final.raw(), 2 * H};
        a.scale = TableSlice{static_cast<const char*>(tab.final.raw()) + H * e, 2 * H};
        a.row2 = std::as_const(p.inverse).data<int32_t>();
        a.out = big;
        a.out_f32 = true;
      }
      resid_norm_modulate(st, bf, a);
      AVDIT_CUDA_CHECK_LAUNCH();
    }
    if (prof) profile->mark(st, "rest");
    if (dump) put(dump, dev_, fmt::format("hidden_block{}", i), x);
  }
  if (n_blocks == 0) {
    ResidNormArgs a;
    a.x = device_ptr(x);
    a.w = w_.final_norm.raw();
    a.eps = static_cast<float>(c.final_norm_eps);
    a.shift = TableSlice{tab.final.raw(), 2 * H};
    a.scale = TableSlice{static_cast<const char*>(tab.final.raw()) + H * e, 2 * H};
    a.row2 = std::as_const(p.inverse).data<int32_t>();
    a.out = big;
    a.out_f32 = true;
    a.S = S;
    a.H = H;
    resid_norm_modulate(st, bf, a);
  }
  if (dump) {
    const Tensor fh = host_f32(dev_, tab.final);
    const int64_t M = fh.size(0);
    Tensor sh = Tensor::empty({M, H}, DType::F32), sc = Tensor::empty({M, H}, DType::F32);
    for (int64_t j = 0; j < M; ++j) {
      std::memcpy(sh.f32() + j * H, fh.f32() + j * 2 * H, H * 4);
      std::memcpy(sc.f32() + j * H, fh.f32() + j * 2 * H + H, H * 4);
    }
    (*dump)["final_shift"] = sh;
    (*dump)["final_scale"] = sc;
  }
  // Heads in fp32 on every row, then row selection with the update masks.
  const int64_t Vd = c.video_patch_dim(), Ad = c.audio_latents_dim;
  float* heads_out = reinterpret_cast<float*>(static_cast<char*>(arena_.get()) + off_heads_);
  float* video_all = heads_out;
  float* audio_all = heads_out + S * Vd;
  gemm_.run(mat(big, S, H, DType::F32), mat(w_.video_out_weight), w_.video_out_bias.raw(), video_all, DType::F32);
  gemm_.run(mat(big, S, H, DType::F32), mat(w_.audio_out_weight), w_.audio_out_bias.raw(), audio_all, DType::F32);
  if (dump) {
    put(dump, dev_, "final_video_all", Tensor::wrap(arena_, video_all, {S, Vd}, DType::F32, avdit::Device::CUDA));
    put(dump, dev_, "final_audio_all", Tensor::wrap(arena_, audio_all, {S, Ad}, DType::F32, avdit::Device::CUDA));
  }
  gather_rows_masked(st, video_all, std::as_const(p.img_pos).data<int32_t>(),
                     std::as_const(p.update_mask).data<uint8_t>(), video_out, p.n_img, Vd);
  gather_rows_masked(st, audio_all, std::as_const(p.audio_pos).data<int32_t>(),
                     std::as_const(p.update_audio_mask).data<uint8_t>(), audio_out, p.n_audio, Ad);
  AVDIT_CUDA_CHECK_LAUNCH();
}

Tensor H3CudaModel::refine_text(const Tensor& text_embeds_any, TensorMap* dump) {
  const mh::H3Config& c = config_;
  Tensor te = text_embeds_any.to_f32();
  if (te.ndim() == 3 && te.size(0) == 1) te = te.reshape({te.size(1), te.size(2)});
  AVDIT_REQUIRE(te.ndim() == 2 && te.size(1) == c.text_dim && te.size(0) > 0,
                "H3: text_embeds must be [text_len, {}] (text_dim), found {}", c.text_dim, te.shape_str());
  const int64_t L = te.size(0), H = c.hidden_size, I = c.inner_dim(), F = c.ffn_hidden_size;
  const int64_t heads = c.num_attention_heads, dh = c.attention_head_dim;
  const bool bf = precision_ == Precision::BF16;
  const DType act = act_dtype();
  const int64_t e = dtype_nbytes(act, 1);
  const cudaStream_t st = dev_.stream();
  ensure_arena(L);
  const Tensor text = to_device(dev_, te.to(act));
  const Tensor x = slice(off_x_, {L, H}, act), h = slice(off_h_, {L, H}, act), t = slice(off_t_, {L, H}, act);
  char* big = static_cast<char*>(arena_.get()) + off_big_;
  // 1. condition_proj, then refiner blocks: no RoPE, no adaLN, no gates, one text document.
  gemm_.run(mat(text), mat(w_.condition_proj_weight), w_.condition_proj_bias.raw(), device_ptr(x), act);
  put(dump, dev_, "text_projected", x);
  const AttentionPlan cu = plan_attention(dev_, {0, L}, layout_);
  const float eps = static_cast<float>(c.norm_eps), qk_eps = static_cast<float>(c.qk_norm_eps);
  auto norm_only = [&](const Tensor& w, const void* f, void* out) {
    ResidNormArgs a;
    a.x = device_ptr(x);
    a.f = f;  // plain residual x += f when set (no gate in the refiner)
    a.w = w.raw();
    a.eps = eps;
    a.out = out;
    a.S = L;
    a.H = H;
    resid_norm_modulate(st, bf, a);
    AVDIT_CUDA_CHECK_LAUNCH();
  };
  Tensor refined = cuda_empty(dev_, {L, H}, act);
  const size_t nr = w_.refiner_blocks.size();
  if (nr > 0) norm_only(w_.refiner_blocks[0].norm1, nullptr, device_ptr(h));
  for (size_t r = 0; r < nr; ++r) {
    const DeviceBlock& b = w_.refiner_blocks[r];
    void* qkv = big;
    void* q = big + align_up(L * 3 * I * e);
    void* k = static_cast<char*>(q) + align_up(L * I * e);
    void* v = static_cast<char*>(k) + align_up(L * I * e);
    gemm_.run(mat(h), mat(b.qkv_proj), nullptr, qkv, act);
    qk_norm_rope(st, bf, qkv, b.q_norm.raw(), b.k_norm.raw(), qk_eps, nullptr, nullptr, 0, false, q, k, v, L, heads,
                 dh);
    const Tensor qt = Tensor::wrap(arena_, q, {L, heads, dh}, act, avdit::Device::CUDA);
    const Tensor kt = Tensor::wrap(arena_, k, {L, heads, dh}, act, avdit::Device::CUDA);
    const Tensor vt = Tensor::wrap(arena_, v, {L, heads, dh}, act, avdit::Device::CUDA);
    const Tensor core = attend(qt, kt, vt, cu, L);
    gemm_.run(mat(core.raw(), L, I, act), mat(b.out_proj), nullptr, device_ptr(t), act);
    norm_only(b.norm2, t.raw(), device_ptr(h));  // x += attn; h = norm2(x)
    void* u = big;
    void* gact = big + align_up(L * 2 * F * e);
    gemm_.run(mat(h), mat(b.fc1), nullptr, u, act);
    swiglu(st, bf, u, gact, L, F);
    gemm_.run(mat(gact, L, F, act), mat(b.fc2), nullptr, device_ptr(t), act);
    // x += mlp; then the next block's norm1, or token_refiner.final_norm.
    const bool last = r + 1 == nr;
    norm_only(last ? w_.refiner_final_norm : w_.refiner_blocks[r + 1].norm1, t.raw(),
              last ? device_ptr(refined) : device_ptr(h));
    put(dump, dev_, fmt::format("refiner_block{}", r), x);
  }
  if (nr == 0) norm_only(w_.refiner_final_norm, nullptr, device_ptr(refined));
  put(dump, dev_, "text_refined", refined);
  return host_f32(dev_, refined);
}

mh::PackedOutput H3CudaModel::forward(const mh::PackedLayout& layout, const mh::PackedTimesteps& timesteps,
                                      const Tensor& text_refined, const Tensor& video_rows, const Tensor& audio_rows,
                                      TensorMap* dump) {
  if (!dump && graphs_ && precision_ == Precision::BF16 && attention_ == AttentionImpl::Flash)
    return forward_graphed(layout, timesteps, text_refined, video_rows, audio_rows);
  const DeviceProblem p = prepare(layout, timesteps);
  // The host text is F32 (refine_text returns bf16-valued F32 in the bf16 mode): exact as act.
  const Tensor text = to_device(dev_, text_refined.to_f32().to(act_dtype()));
  const DeviceOutput o = forward_device(p, text, to_device(dev_, video_rows.to_f32()),
                                        to_device(dev_, audio_rows.to_f32()), dump);
  return {to_host(dev_, o.video_out), to_host(dev_, o.audio_out)};
}

}  // namespace avdit::cuda::h3
