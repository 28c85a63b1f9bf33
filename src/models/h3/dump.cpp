// The H3 dump probe (see dump.h).
#include "models/h3/dump.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "ops/context.h"

namespace avdit::models::h3 {
namespace {

constexpr const char* kBlockPoints[] = {
    "block{}_adaln_linear_out", "block{}_norm1",    "block{}_attn_in", "block{}_qkv",
    "block{}_q_normed",         "block{}_k_normed", "block{}_q_rope",  "block{}_k_rope",
    "block{}_attn_core",        "block{}_attn_out", "block{}_mlp_in",  "block{}_mlp_out"};
constexpr const char* kOtherPoints[] = {"text_projected",     "refiner_block{}", "text_refined",
                                        "hidden_embed",       "t_emb",           "adaln_input",
                                        "rope_cos_sin_cache", "hidden_block{}",  "final_adaln",
                                        "final_video_all",    "final_audio_all"};
constexpr const char* kSliceNames[kAdalnSlices] = {"shift_msa", "scale_msa", "gate_msa",
                                                   "shift_mlp", "scale_mlp", "gate_mlp"};

// Columns [col, col + H) of every row of a [R, W] host table.
Tensor columns(const Tensor& t, int64_t rows, int64_t W, int64_t col, int64_t H) {
  Tensor out = Tensor::empty({rows, H}, DType::F32);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.f32() + r * H, t.f32() + r * W + col, H * sizeof(float));
  return out;
}

}  // namespace

bool DumpProbe::wants(const Point& p) const {
  for (const char* n : kBlockPoints)
    if (p.is(n)) return p.index == 0;
  for (const char* n : kOtherPoints)
    if (p.is(n)) return true;
  return false;
}

void DumpProbe::on(ops::Context& ctx, const Point& p, Tensor& t) {
  const Tensor h = ctx.download(t).to_f32().clone();
  const int64_t H = config_.hidden_size;
  if (p.is("block{}_qkv")) {
    // [S, heads, 3, dh] as stored -> the fixture's regrouped [S, 3 I] = Q_all | K_all | V_all.
    const int64_t S = h.size(0), heads = h.size(1), dh = h.size(3), I = heads * dh;
    Tensor q = Tensor::empty({S, 3 * I}, DType::F32);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t hd = 0; hd < heads; ++hd)
        for (int part = 0; part < 3; ++part)
          std::memcpy(q.f32() + s * 3 * I + part * I + hd * dh,
                      h.f32() + ((s * heads + hd) * 3 + part) * dh, dh * sizeof(float));
    out_["block0_qkv"] = q;
    return;
  }
  if (p.is("block{}_adaln_linear_out")) {
    // [M, 18 H] viewed as [3M, 6H]; slice s of row j starts at j * 6H + s * H.
    out_["block0_adaln_linear_out"] = h;
    const int64_t rows = h.numel() / (kAdalnSlices * H);
    for (int64_t s = 0; s < kAdalnSlices; ++s)
      out_[std::string("block0_") + kSliceNames[s]] = columns(h, rows, kAdalnSlices * H, s * H, H);
    return;
  }
  if (p.is("final_adaln")) {
    const int64_t M = h.size(0);
    out_["final_shift"] = columns(h, M, 2 * H, 0, H);
    out_["final_scale"] = columns(h, M, 2 * H, H, H);
    return;
  }
  out_[p.str()] = h;
}

}  // namespace avdit::models::h3
