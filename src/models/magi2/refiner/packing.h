// The refiner's packed sequence, as refiner_data_proxy.py builds it for one item (window attention
// takes batch 1): video tokens cut into (bt, bh, bw) blocks and reordered block-major (blocks in
// raster order, raster inside a block, partial edge blocks), then the tail (audio, text)
// unchanged; the coordinates of every token (original positions, permuted with the tokens); and
// the moves between the un-packed latents and model order as element indices, so that packing
// and de-packing run on the model's context.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "models/magi2/refiner/config.h"
#include "ops/windowed_attention.h"

namespace avdit::models::magi2::refiner {

// The video latent grid cut into blocks; block b = (tb * nh + hb) * nw + wb occupies model
// positions blocks[b] (_build_block_order, _build_video_block_ranges).
struct BlockGrid {
  int64_t T = 0, H = 0, W = 0;     // latent tokens per axis
  int64_t bt = 1, bh = 1, bw = 1;  // block size per axis
  int64_t nt = 0, nh = 0, nw = 0;  // blocks per axis: ceil(size / block)
  std::vector<ops::Range> blocks;
  int64_t count() const { return nt * nh * nw; }
};
BlockGrid block_grid(int64_t T, int64_t H, int64_t W, const WindowConfig& window);

// token_order[p]: the pre-order token (video raster (t, h, w), then the tail) at model position p.
std::vector<int32_t> block_token_order(const BlockGrid& grid, int64_t total_tokens);

// One refiner input layout: everything that depends on the shapes only, built on the host.
struct RefinerLayout {
  BlockGrid grid;
  int64_t channels = 0;  // C of the video latent
  int64_t video = 0, audio = 0, text = 0;
  std::vector<int32_t> token_order, token_restore_order;  // [L] (see block_token_order)
  std::vector<int32_t> modality;                          // [L] model order: 0, 1, 2
  Tensor coords;                  // F32 [L, 9] model order: (t, h, w, T, H, W, T_ref, H_ref, W_ref)
  std::vector<int32_t> video_in;  // video_x.flat[i] = latent.flat[video_in[i]]: [V, C] model order
  std::vector<int32_t> video_out;  // velocity.flat[i] = model_output.flat[video_out[i]]
  std::vector<int32_t> audio_out;  // audio velocity [1, L_a, C_a] likewise
  int64_t tokens() const { return video + audio + text; }
};

// video [1, C_v, T, H, W] (T, H, W the refiner's latent grid), audio_tokens x C_a, text_tokens x
// C_t. BadInput (exit 2) names the shape that does not fit the config.
RefinerLayout refiner_layout(const RefinerConfig& config, const Shape& video, int64_t audio_tokens,
                             int64_t text_tokens);

// The reference's x [L, max(C_v, C_a, C_t)] F32 on the host (model order, rows zero-padded) from
// un-packed video [1, C, T, H, W], audio [1, L_a, C_a], text [1, L_t, C_t]: what the golden stores;
// the model itself takes the three parts (RefinerModel::forward), never this padded copy.
Tensor packed_x(const RefinerConfig& config, const RefinerLayout& layout, const Tensor& video,
                const Tensor& audio, const Tensor& text);

}  // namespace avdit::models::magi2::refiner
