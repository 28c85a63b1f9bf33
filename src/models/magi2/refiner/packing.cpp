// The refiner's packing (see packing.h), step by step as Magi2RefinerDataProxy.process_input.
#include "models/magi2/refiner/packing.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace avdit::models::magi2::refiner {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// _dim_block_sizes: full blocks, the last one partial when the size is not a multiple.
int64_t block_size_at(int64_t size, int64_t block, int64_t i) {
  return std::min(block, size - i * block);
}

}  // namespace

BlockGrid block_grid(int64_t T, int64_t H, int64_t W, const WindowConfig& window) {
  BlockGrid g;
  g.T = T, g.H = H, g.W = W;
  g.bt = window.block_t, g.bh = window.block_h, g.bw = window.block_w;
  g.nt = ceil_div(T, g.bt), g.nh = ceil_div(H, g.bh), g.nw = ceil_div(W, g.bw);
  int64_t start = 0;
  for (int64_t tb = 0; tb < g.nt; ++tb)
    for (int64_t hb = 0; hb < g.nh; ++hb)
      for (int64_t wb = 0; wb < g.nw; ++wb) {
        const int64_t n =
            block_size_at(T, g.bt, tb) * block_size_at(H, g.bh, hb) * block_size_at(W, g.bw, wb);
        g.blocks.push_back({start, start + n});
        start += n;
      }
  return g;
}

std::vector<int32_t> block_token_order(const BlockGrid& g, int64_t total_tokens) {
  std::vector<int32_t> order;
  order.reserve(static_cast<size_t>(total_tokens));
  for (int64_t tb = 0; tb < g.nt; ++tb)
    for (int64_t hb = 0; hb < g.nh; ++hb)
      for (int64_t wb = 0; wb < g.nw; ++wb)
        for (int64_t t = tb * g.bt; t < std::min(g.T, (tb + 1) * g.bt); ++t)
          for (int64_t h = hb * g.bh; h < std::min(g.H, (hb + 1) * g.bh); ++h)
            for (int64_t w = wb * g.bw; w < std::min(g.W, (wb + 1) * g.bw); ++w)
              order.push_back(static_cast<int32_t>((t * g.H + h) * g.W + w));
  for (int64_t j = g.T * g.H * g.W; j < total_tokens; ++j) order.push_back(static_cast<int32_t>(j));
  return order;
}

RefinerLayout refiner_layout(const RefinerConfig& c, const Shape& video, int64_t audio_tokens,
                             int64_t text_tokens) {
  AVDIT_REQUIRE(video.size() == 5 && video[0] == 1 && video[1] == c.video_in_channels &&
                    video[2] >= 1 && video[3] >= 1 && video[4] >= 1,
                "magi2 refiner: the video latent has shape {}, expected [1, {}, T, H, W] (batch 1: "
                "window attention packs one item; {} channels: video_in_channels)",
                shape_str(video), c.video_in_channels, c.video_in_channels);
  AVDIT_REQUIRE(audio_tokens >= 0 && text_tokens >= 0,
                "magi2 refiner: negative audio ({}) or text ({}) length", audio_tokens,
                text_tokens);
  RefinerLayout l;
  const int64_t T = video[2], H = video[3], W = video[4];
  l.channels = video[1];
  l.video = T * H * W;
  l.audio = audio_tokens;
  l.text = text_tokens;
  const int64_t L = l.tokens();
  AVDIT_REQUIRE(L * std::max(c.out_channels, l.channels) < (int64_t{1} << 31),
                "magi2 refiner: {} tokens ({} video) x {} channels do not fit 32-bit indices", L,
                l.video, std::max(c.out_channels, l.channels));
  l.grid = block_grid(T, H, W, c.data_proxy.window);
  l.token_order = block_token_order(l.grid, L);
  l.token_restore_order.assign(static_cast<size_t>(L), 0);
  for (int64_t p = 0; p < L; ++p) l.token_restore_order[l.token_order[p]] = static_cast<int32_t>(p);

  // Coordinates in pre-order (SingleData.coords_mapping), then gathered into model order.
  std::vector<float> pre(static_cast<size_t>(L * 9));
  auto put = [&](int64_t j, std::initializer_list<double> v) {
    std::copy(v.begin(), v.end(), pre.begin() + j * 9);
  };
  const bool inter = c.data_proxy.spatial_rope_interpolation == "inter";
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w)
        put((t * H + h) * W + w, {double(t), double(h), double(w), double(T), double(H), double(W),
                                  double(T), inter ? 32.0 : double(H), inter ? 32.0 : double(W)});
  // Python's floor division: (L_a - 1) // 8 + 1 (no rows use it when L_a = 0).
  const int64_t audio_ref = audio_tokens > 0 ? (audio_tokens - 1) / 8 + 1 : 0;
  for (int64_t i = 0; i < audio_tokens; ++i)
    put(l.video + i, {double(i), 0, 0, double(audio_tokens), 1, 1, double(audio_ref), 1, 1});
  for (int64_t j = 0; j < text_tokens; ++j)
    put(l.video + audio_tokens + j,
        {double(j - text_tokens), 0, 0, double(text_tokens), 1, 1, 1, 1, 1});
  l.coords = Tensor::empty({L, 9}, DType::F32);
  float* co = l.coords.f32();
  for (int64_t p = 0; p < L; ++p)
    std::memcpy(co + p * 9, pre.data() + static_cast<int64_t>(l.token_order[p]) * 9,
                9 * sizeof(float));

  l.modality.assign(static_cast<size_t>(L), 2);
  std::fill(l.modality.begin(), l.modality.begin() + l.video, 0);
  std::fill(l.modality.begin() + l.video, l.modality.begin() + l.video + l.audio, 1);

  const int64_t C = l.channels, V = l.video, out = c.out_channels, Ca = c.audio_in_channels;
  l.video_in.resize(static_cast<size_t>(V * C));
  for (int64_t p = 0; p < V; ++p)
    for (int64_t ch = 0; ch < C; ++ch)
      l.video_in[p * C + ch] = static_cast<int32_t>(ch * V + l.token_order[p]);
  l.video_out.resize(static_cast<size_t>(V * C));
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t j = 0; j < V; ++j)
      l.video_out[ch * V + j] = static_cast<int32_t>(l.token_restore_order[j] * out + ch);
  l.audio_out.resize(static_cast<size_t>(l.audio * Ca));
  for (int64_t i = 0; i < l.audio; ++i)
    for (int64_t ch = 0; ch < Ca; ++ch)
      l.audio_out[i * Ca + ch] = static_cast<int32_t>(l.token_restore_order[V + i] * out + ch);
  return l;
}

Tensor packed_x(const RefinerConfig& c, const RefinerLayout& l, const Tensor& video_in,
                const Tensor& audio_in, const Tensor& text_in) {
  const Tensor video = video_in.to_f32(), audio = audio_in.to_f32(), text = text_in.to_f32();
  AVDIT_REQUIRE(video.numel() == l.video * l.channels &&
                    audio.numel() == l.audio * c.audio_in_channels &&
                    text.numel() == l.text * c.text_in_channels,
                "magi2 refiner: inputs {} {} {} do not match the layout ({} video tokens x {}, {} "
                "audio x {}, {} text x {})",
                video.shape_str(), audio.shape_str(), text.shape_str(), l.video, l.channels,
                l.audio, c.audio_in_channels, l.text, c.text_in_channels);
  const int64_t width = c.max_in_channels, L = l.tokens();
  Tensor x = Tensor::zeros({L, width}, DType::F32);
  float* px = x.f32();
  const float *pv = std::as_const(video).f32(), *pa = std::as_const(audio).f32(),
              *pt = std::as_const(text).f32();
  for (int64_t p = 0; p < l.video; ++p)
    for (int64_t ch = 0; ch < l.channels; ++ch)
      px[p * width + ch] = pv[l.video_in[p * l.channels + ch]];
  for (int64_t i = 0; i < l.audio; ++i)
    std::memcpy(px + (l.video + i) * width, pa + i * c.audio_in_channels,
                sizeof(float) * c.audio_in_channels);
  for (int64_t j = 0; j < l.text; ++j)
    std::memcpy(px + (l.video + l.audio + j) * width, pt + j * c.text_in_channels,
                sizeof(float) * c.text_in_channels);
  return x;
}

}  // namespace avdit::models::magi2::refiner
