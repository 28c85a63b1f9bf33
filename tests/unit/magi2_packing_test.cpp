// The sampler's packing on a context (packing_index: element indices for ops::gather_elements)
// against the host packing that the golden parity test checks (pack_inputs / unpack_outputs), on
// random latents at two configs (patch sizes 1x2x2 and 2x2x2), items sharing the latents with texts
// of different lengths (one empty: the null prompt): the packed rows, their structure and the
// unpacked velocities, bit for bit.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "core/rng.h"
#include "models/magi2/packing.h"
#include "ops/context.h"
#include "ops/rows.h"

namespace avdit::models::magi2 {
namespace {

Magi2Config config(int64_t t_patch) {
  return parse_magi2_config(nlohmann::json::parse(fmt::format(R"({{
    "arch_config": {{
      "num_layers": 2, "hidden_size": 64, "head_dim": 32, "num_query_groups": 1,
      "video_in_channels": {}, "audio_in_channels": 12, "text_in_channels": 24, "mm_layers": [0],
      "mhc_config": {{"enable": true, "num_stream": 2}},
      "moe_config": {{"moe_layers": [1], "num_heads": 2, "num_experts": 4, "top_k": 2,
                     "expert_intermediate_size": 16}}
    }},
    "evaluation_config": {{"data_proxy_config": {{"t_patch_size": {}, "patch_size": 2, "time_channel_dim": 16}}}}
  }})",
                                                              3 * 4 * t_patch, t_patch)));
}

Tensor random(Shape shape, uint64_t stream) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  fill_normal(t, 3, stream);
  return t;
}

// Item b of B copies of x along dim 0.
Tensor repeat(const Tensor& x, int64_t B) {
  Shape s = x.shape();
  s[0] = B;
  Tensor out = Tensor::empty(s, DType::F32);
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(out.f32() + b * x.numel(), std::as_const(x).f32(), x.nbytes());
  return out;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(Magi2Packing, IndicesEqualHostPacking) {
  for (const int64_t t_patch : {1, 2}) {
    const Magi2Config c = config(t_patch);
    const std::vector<int64_t> text_lens = {5, 0, 3};
    const int64_t B = 3, C = 3, T = 2 * t_patch, H = 4, W = 6, La = 7, Lt = 5;
    const Tensor video = random({1, C, T, H, W}, 1),
                 audio = random({1, La, c.audio_in_channels}, 2);
    const Tensor text = random({B, Lt, c.text_in_channels}, 3);
    TensorMap in;
    in["video_latent"] = repeat(video, B);
    in["audio_latent"] = repeat(audio, B);
    in["txt_feat"] = text;
    in["txt_feat_len"] = Tensor::from_data({B}, DType::I64, text_lens.data());
    in["audio_feat_len"] = Tensor::from_data({B}, DType::I64, std::vector<int64_t>(B, La).data());
    in["per_token_video_t"] = Tensor::zeros({B, 1, T, H, W}, DType::F32);
    in["per_token_audio_t"] = Tensor::zeros({B, La, 1}, DType::F32);
    const PackedSequence host = pack_inputs(c, in);
    const PackingIndex idx = packing_index(c, video.shape(), audio.shape(), text_lens, Lt);
    EXPECT_EQ(idx.layout.modality, host.modality);
    EXPECT_EQ(idx.layout.cu_seqlens, host.cu_seqlens);
    EXPECT_TRUE(same(idx.layout.coords, host.coords));
    for (size_t l = 0; l < idx.noisy.size(); ++l)
      EXPECT_EQ(idx.noisy[l], host.modality[l] == kText ? 0 : 1) << "token " << l;
    // The source the stepper fills: [video | audio | texts | 0].
    Tensor source = Tensor::zeros({idx.source_size}, DType::F32);
    std::memcpy(source.f32(), std::as_const(video).f32(), video.nbytes());
    std::memcpy(source.f32() + video.numel(), std::as_const(audio).f32(), audio.nbytes());
    std::memcpy(source.f32() + video.numel() + audio.numel(), std::as_const(text).f32(),
                text.nbytes());
    ops::CpuContext ctx;
    Tensor x = Tensor::empty(host.x.shape(), DType::F32);
    ops::gather_elements(ctx, source, ops::index_tensor(ctx, idx.x), x);
    EXPECT_TRUE(same(x, host.x)) << "packed rows, t_patch " << t_patch;
    // De-packing of a random model output, per item.
    const Tensor out = random({host.tokens(), c.out_channels}, 4);
    Tensor video_v, audio_v;
    unpack_outputs(c, host, out, video_v, audio_v);
    for (int64_t b = 0; b < B; ++b) {
      Tensor v = Tensor::empty(video.shape(), DType::F32),
             a = Tensor::empty(audio.shape(), DType::F32);
      ops::gather_elements(ctx, out, ops::index_tensor(ctx, idx.video_out[b]), v);
      ops::gather_elements(ctx, out, ops::index_tensor(ctx, idx.audio_out[b]), a);
      EXPECT_EQ(std::memcmp(v.raw(), std::as_const(video_v).f32() + b * v.numel(), v.nbytes()), 0)
          << "video " << b;
      EXPECT_EQ(std::memcmp(a.raw(), std::as_const(audio_v).f32() + b * a.numel(), a.nbytes()), 0)
          << "audio " << b;
    }
  }
}

}  // namespace
}  // namespace avdit::models::magi2
