// decode_base of the reference on the op set: de-normalise, cut the latent into temporal chunks,
// decode each (tiled_decode over spatial tiles, decode_tile per tile, vit.cpp), stitch the chunks
// with the cross-fade of _decode_temporal_streaming, and cut the padding's frames.
#include "models/vae/h3video/decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/h3video/plan.h"
#include "models/vae/h3video/tables.h"
#include "ops/check.h"
#include "ops/context.h"
#include "ops/linear.h"
#include "ops/rows.h"
#include "ops/window.h"

namespace avdit::models::vae::h3video {
namespace {

// The latent as [Z, T, h, w] on ctx in F32, checked: BadInput naming `latents`.
Tensor checked_latents(ops::Context& ctx, const H3VideoConfig& c, const Tensor& latents) {
  AVDIT_REQUIRE(latents.defined(), "H3 video VAE: latents are missing");
  const bool batched = latents.ndim() == 5;
  AVDIT_REQUIRE((batched && latents.size(0) == 1) || latents.ndim() == 4,
                "H3 video VAE: latents have shape {}, expected [1, {}, T, h, w] or [{}, T, h, w]",
                latents.shape_str(), c.z_channels, c.z_channels);
  const int off = batched ? 1 : 0;
  AVDIT_REQUIRE(latents.size(off) == c.z_channels,
                "H3 video VAE: latents have {} channels (shape {}), this decoder takes {}",
                latents.size(off), latents.shape_str(), c.z_channels);
  for (int d = off + 1; d < latents.ndim(); ++d)
    AVDIT_REQUIRE(latents.size(d) >= 1, "H3 video VAE: latents have an empty axis (shape {})",
                  latents.shape_str());
  AVDIT_REQUIRE(latents.dtype() == DType::F32 || latents.dtype() == DType::BF16 ||
                    latents.dtype() == DType::F16,
                "H3 video VAE: latents have dtype {}, expected F32, BF16 or F16",
                dtype_name(latents.dtype()));
  const Shape shape{c.z_channels, latents.size(off + 1), latents.size(off + 2),
                    latents.size(off + 3)};
  Tensor z = latents.device() == Device::CPU ? ctx.upload(latents.to(DType::F32))
                                             : ops::cast(ctx, latents, DType::F32);
  const ops::NonFinite bad = ops::count_nonfinite(ctx, z);
  AVDIT_REQUIRE(bad.count == 0,
                "H3 video VAE: latents hold {} values that are not finite (NaN or Inf; the first "
                "at flat index {}): the latents are broken, nothing was decoded",
                bad.count, bad.first);
  return z.reshape(shape);
}

// The rows of tokens [T h w, Z] for latent frames [t0, t1) (frames past T repeat the last: the
// reference's padding), spatial cells [y0, y0 + th) x [x0, x0 + tw) of an h x w grid.
Tensor cell_rows(int64_t T, int64_t h, int64_t w, int64_t t0, int64_t t1, int64_t y0, int64_t th,
                 int64_t x0, int64_t tw) {
  std::vector<int32_t> idx;
  idx.reserve(static_cast<size_t>((t1 - t0) * th * tw));
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t y = y0; y < y0 + th; ++y)
      for (int64_t x = x0; x < x0 + tw; ++x)
        idx.push_back(static_cast<int32_t>((std::min(t, T - 1) * h + y) * w + x));
  return Tensor::from_data({static_cast<int64_t>(idx.size())}, DType::I32, idx.data());
}

}  // namespace

H3VideoDecoder::H3VideoDecoder(ops::Context& ctx, const Checkpoint& ckpt,
                               const H3VideoConfig& config, DType act)
    : ctx_(ctx), config_(config), act_(act) {
  AVDIT_REQUIRE(act == DType::F32 || act == DType::BF16,
                "H3 video VAE: activations in {} are not supported (F32 or BF16)", dtype_name(act));
  w_ = load_weights(ctx, ckpt, config_, act_, &weight_bytes_);
  head_ones_ = ctx.upload(
      Tensor::from_floats(std::vector<float>(static_cast<size_t>(config_.dim_head), 1.f),
                          {config_.dim_head})
          .to(act_));
}

std::string H3VideoDecoder::describe() const {
  return fmt::format("MiniMax-H3 video ViT VAE decoder, z{} (D {}, {} blocks, {}, {})",
                     config_.z_channels, config_.dim(), config_.num_layers, ctx_.name(),
                     dtype_name(act_));
}

void H3VideoDecoder::set_tiling(int64_t tile_px, int64_t overlap_min_px) {
  const int64_t r = config_.ratio;
  AVDIT_REQUIRE(tile_px >= 0 && overlap_min_px >= 0 && tile_px % r == 0 &&
                    overlap_min_px % r == 0 && (tile_px == 0 || overlap_min_px < tile_px),
                "H3 video VAE: tile {} px with overlap {} px: both must be multiples of {} and the "
                "overlap below the tile",
                tile_px, overlap_min_px, r);
  config_.decoder_tiling = tile_px > 0;
  if (tile_px > 0) config_.tile_size = tile_px, config_.tile_overlap_min = overlap_min_px;
}

Tensor H3VideoDecoder::decode_chunk(const Tensor& tokens, int64_t T, int64_t h, int64_t w,
                                    int64_t t0, int64_t t1, int64_t chunk, int64_t& part) const {
  ops::Context& ctx = ctx_;
  const H3VideoConfig& c = config_;
  const int64_t r = c.ratio, tc = t1 - t0;
  ops::observe_lazy(ctx, {"clip{}.latent", chunk}, [&] {
    return ops::gather_rows(ctx, tokens, ctx.upload(cell_rows(T, h, w, t0, t1, 0, h, 0, w)));
  });
  const bool tiled = c.decoder_tiling && c.tile_size > 0;
  const AxisTiles ys =
      tiled ? split_tiles(h * r, c.tile_size, c.tile_overlap_min, r) : AxisTiles{{0}, h * r, {}};
  const AxisTiles xs =
      tiled ? split_tiles(w * r, c.tile_size, c.tile_overlap_min, r) : AxisTiles{{0}, w * r, {}};
  const int64_t th = ys.len / r, tw = xs.len / r;
  std::vector<std::vector<Tensor>> grid(ys.start.size());
  for (size_t i = 0; i < ys.start.size(); ++i)
    for (size_t j = 0; j < xs.start.size(); ++j) {
      const Tensor idx =
          ctx.upload(cell_rows(T, h, w, t0, t1, ys.start[i] / r, th, xs.start[j] / r, tw));
      grid[i].push_back(decode_tile(ops::gather_rows(ctx, tokens, idx), tc, th, tw, part++));
    }
  if (grid.size() == 1 && grid[0].size() == 1) return grid[0][0];
  // Assembly: each tile cross-faded with the unblended tile above and then the unblended tile to
  // its left, cropped by the overlaps it shares with the next ones, placed at its start.
  const int64_t planes = c.out_channels * tc * c.ratio_t, H = h * r, W = w * r;
  Tensor out = ctx.empty({c.out_channels, tc * c.ratio_t, H, W}, DType::F32);
  Tensor out3 = out.reshape({planes, H, W});
  const int64_t Ht = ys.len, Wt = xs.len;
  for (size_t i = 0; i < grid.size(); ++i)
    for (size_t j = 0; j < grid[i].size(); ++j) {
      Tensor cur = (i > 0 || j > 0) ? ops::clone(ctx, grid[i][j]) : grid[i][j];
      if (i > 0) {
        const int64_t e = std::min(Ht, ys.overlap[i - 1]);
        Tensor b = cur.reshape({planes, Ht, Wt});
        ops::blend_rows(ctx, grid[i - 1][j].reshape({planes, Ht, Wt}), Ht - e, b, 0, e);
      }
      if (j > 0) {
        const int64_t e = std::min(Wt, xs.overlap[j - 1]);
        Tensor b = cur.reshape({planes * Ht, Wt, 1});
        ops::blend_rows(ctx, grid[i][j - 1].reshape({planes * Ht, Wt, 1}), Wt - e, b, 0, e);
      }
      const int64_t keep_h = i + 1 < grid.size() ? Ht - ys.overlap[i] : Ht;
      const int64_t keep_w = j + 1 < grid[i].size() ? Wt - xs.overlap[j] : Wt;
      Tensor src = cur.reshape({planes, Ht, Wt});
      ops::copy_window(ctx, src, {0, 0, keep_h, keep_w}, out3, ys.start[i], xs.start[j]);
      // Row i - 1 has served its last blend once row i is placed: its memory goes back.
      if (i > 0 && j + 1 == grid[i].size()) grid[i - 1].clear();
    }
  return out;
}

Tensor H3VideoDecoder::decode(const Tensor& latents) const {
  return ctx_.download(decode_on_device(latents));
}

Tensor H3VideoDecoder::decode_on_device(const Tensor& latents) const {
  ops::Context& ctx = ctx_;
  const H3VideoConfig& c = config_;
  const Tensor z = checked_latents(ctx, c, latents);
  const int64_t Z = c.z_channels, T = z.size(1), h = z.size(2), w = z.size(3);
  // [Z, T, h, w] -> tokens [T h w, Z], then latent * std + mean per channel.
  Tensor tokens = ctx.empty({T * h * w, Z}, DType::F32);
  ops::gather_elements(ctx, z, ctx.upload(tokens_index(Z, T, h, w)), tokens);
  const Tensor denorm = ops::linear(ctx, tokens, w_.denorm, &w_.denorm_bias);
  ops::observe(ctx, {"latent_denorm"}, denorm);

  const TemporalPlan p = plan_temporal(c, T);
  const int64_t C = c.out_channels, HW = h * w * c.ratio * c.ratio, padded = T + p.pad_tokens;
  Tensor out = ctx.empty({C, p.output_frames, h * c.ratio, w * c.ratio}, DType::F32);
  Tensor out3 = out.reshape({C, p.output_frames, HW});
  int64_t written = 0, part = 0;
  // Frames past the output (the padding's) are dropped, as the reference's write_part does.
  auto write = [&](const Tensor& src3, int64_t row, int64_t frames) {
    const int64_t n = std::min(frames, p.output_frames - written);
    if (n <= 0) return;
    ops::copy_window(ctx, src3, {row, 0, n, HW}, out3, written, 0);
    written += n;
  };
  Tensor pending;  // the previous chunk's overlap frames [C, n, HW]
  for (int64_t i = 0; i < p.num_chunks; ++i) {
    const int64_t t0 = std::min(p.begin(i), padded), t1 = p.end(i, padded);
    const Tensor clip = decode_chunk(denorm, T, h, w, t0, t1, i, part);
    const int64_t frames = (t1 - t0) * c.ratio_t;
    Tensor clip3 = clip.reshape({C, frames, HW});
    for (int64_t j = 0; j < p.splits; ++j) {
      const int64_t f0 = j * p.chunk_dec, f1 = std::min(f0 + p.chunk_dec, frames);
      const int64_t start = f0 + p.P, len = std::max<int64_t>(f1 - start, 0);
      if (j == 0) {
        if (pending.defined()) {
          const int64_t e = std::min({pending.size(1), len, p.F});
          if (e > 0) ops::blend_rows(ctx, pending, pending.size(1) - e, clip3, start, e);
          pending = Tensor();
        }
        write(clip3, start, len);
      } else if (len > 0) {
        pending = ctx.empty({C, len, HW}, DType::F32);
        ops::copy_window(ctx, clip3, {start, 0, len, HW}, pending, 0, 0);
      } else {
        pending = Tensor();
      }
    }
  }
  if (pending.defined()) write(pending, 0, pending.size(1));
  AVDIT_CHECK(written == p.output_frames, "H3 video VAE: wrote {} of {} planned frames", written,
              p.output_frames);
  return out;
}

Tensor imagenet_to_unit(const Tensor& video) {
  constexpr float kMean[3] = {0.485f, 0.456f, 0.406f}, kStd[3] = {0.229f, 0.224f, 0.225f};
  AVDIT_REQUIRE(video.ndim() == 4 && video.size(0) == 3,
                "H3 video VAE: expected video [3, T, H, W], got {}", video.shape_str());
  Tensor out = video.to(DType::F32).clone();
  const int64_t plane = out.numel() / 3;
  for (int64_t ch = 0; ch < 3; ++ch)
    for (int64_t i = 0; i < plane; ++i) {
      // torchvision Normalize(-m/s, 1/s): (x - (-m/s)) / (1/s), then clamp(0, 1).
      float& v = out.f32()[ch * plane + i];
      v = std::clamp((v + kMean[ch] / kStd[ch]) / (1.0f / kStd[ch]), 0.0f, 1.0f);
    }
  return out;
}

}  // namespace avdit::models::vae::h3video

namespace avdit::models::vae {
namespace {

// The value of the first key of j that starts with `prefix` (the golden's annotated key names).
const nlohmann::json* find_prefixed(const nlohmann::json& j, std::string_view prefix) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::string_view(it.key()).starts_with(prefix) && it.value().is_object())
      return &it.value();
  return nullptr;
}

}  // namespace

std::unique_ptr<Decoder> open_h3_video_decoder(ops::Context& ctx, const std::filesystem::path& dir,
                                               DType act) {
  namespace fs = std::filesystem;
  std::error_code ec;
  AVDIT_REQUIRE(fs::is_regular_file(dir / "config.json", ec),
                "H3 video VAE {}: no config.json (the release's video_vae folder is needed)",
                dir.string());
  const nlohmann::json top = read_json(dir / "config.json");
  nlohmann::json outer, source;
  fs::path weights;
  if (top.contains("source_path")) {
    // The release: config.json names the source folder and its safetensors.
    AVDIT_REQUIRE(top["source_path"].is_string() &&
                      top.value("source_safetensors_path", nlohmann::json()).is_string(),
                  "H3 video VAE {}: config.json needs source_path and source_safetensors_path",
                  dir.string());
    const fs::path src = dir / top["source_path"].get<std::string>();
    outer = top;
    source = read_json(src / "config.json");
    weights = src / top["source_safetensors_path"].get<std::string>();
  } else {
    // A golden folder: one config.json holding both files' contents.
    const nlohmann::json* o = find_prefixed(top, "config.json");
    const nlohmann::json* s = find_prefixed(top, "source/config.json");
    AVDIT_REQUIRE(o && s,
                  "H3 video VAE {}: config.json has no source_path (release layout) nor the "
                  "golden's 'config.json' and 'source/config.json' entries",
                  dir.string());
    outer = *o, source = *s;
    weights = dir / "model.safetensors";
  }
  AVDIT_REQUIRE(fs::is_regular_file(weights, ec), "H3 video VAE {}: weights {} not found",
                dir.string(), weights.string());
  const auto config = h3video::H3VideoConfig::from_json(outer, source);
  const Checkpoint ckpt = Checkpoint::open(weights, h3video::is_needed);
  return std::make_unique<h3video::H3VideoDecoder>(ctx, ckpt, config, act);
}

}  // namespace avdit::models::vae
