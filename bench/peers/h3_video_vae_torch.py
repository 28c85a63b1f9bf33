#!/usr/bin/env python3
"""MiniMax-H3's video VAE decoder (ViT, 24 latent channels, x4 time, x16 space) in PyTorch: the peer
of `avdit bench vae --decoder h3video` (issue 32), written from the decode procedure of
../shared/golden/vae-h3video-tiny/README.md (the release ships no pipeline for it). Functional: the
weights are a state dict under the reference's names (`post_quant_conv.*`, `decoder.*`), so the
fixture's tiny weights and random production-size ones run through the same code.

    h3_video_vae_torch.py --check GOLDEN_DIR [--device cpu|cuda]
        decodes the fixture's latent with its weights in float32 (untiled, then with the fixture's
        32/16 px tiles) and prints max |peer - golden| / max |golden| of `video`, `video_tiled` and
        chunk 0's intermediates (the README's bar for float32: 1e-4); exit 1 above it.

Timing: `bench_setup(frames, height, width, device, dtype)` -> (decode_fn, latent_shape, params),
the clip as `avdit bench vae --decoder h3video` defines its latent.

Precision: the reference runs its blocks under autocast, so with dtype bf16 the blocks' four linears
and the attention run in bf16 while the residual stream, every norm, RoPE, x_embedder, norm_out and
proj_out stay float32 (as avdit's bf16 path does); with float32 everything is float32.
"""
import math

import torch
import torch.nn.functional as F

from h3_peer import check_points, golden_main, open_golden  # the peers' shared pieces (torch only)

# Production: FL2VA/video_vae/config.json (chunk/tile knobs; ../shared/reference-configs/h3) and
# source/config.json's vit_decoder_kwargs (the fixture's `production_vit_decoder_kwargs`).
PRODUCTION = {"z_channels": 24, "out_ch": 3, "ratio": 16, "ratio_t": 4, "heads": 32, "dim_head": 64,
              "num_layers": 36, "num_register_tokens": 4, "rope_dim_ratio": 0.75, "rope_theta": 100.0,
              "eps": 1e-5, "clip_length": 17, "token_drop": 3, "tile_size": 256, "tile_overlap_min": 64}


def linear(sd, p, x):
    """Linear in the weight's dtype (bf16 blocks: the autocast region; float32 elsewhere)."""
    w = sd[p + "weight"]
    return F.linear(x.to(w.dtype), w, sd[p + "bias"])


def rope_tables(cfg, t, h, w, device):
    """RotaryEmbeddingND: positions 2 (k + 0.5) / n - 1 per axis over the t x h x w raster, (0, 0, 0)
    for the register and cls tokens; d_r / 6 frequencies per axis, angles axis-major, the d_r / 2
    angles concatenated twice (rotate_half pairing). cos, sin [1, N, 1, d_r] in float32."""
    dr = int(cfg["dim_head"] * cfg["rope_dim_ratio"])
    inv = 1.0 / cfg["rope_theta"] ** torch.arange(0, 1, 6 / dr, device=device, dtype=torch.float32)
    axes = [2 * (torch.arange(n, device=device, dtype=torch.float32) + 0.5) / n - 1 for n in (t, h, w)]
    pos = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    pos = torch.cat([pos, pos.new_zeros(cfg["num_register_tokens"] + 1, 3)])
    ang = (2 * math.pi * pos[:, :, None] * inv).flatten(1)
    ang = torch.cat([ang, ang], -1)[None, :, None]
    return ang.cos(), ang.sin()


def rope(x, cos, sin):
    """x [B, N, heads, dh]: the first d_r dims rotated in float32 (q times the float32 tables
    promotes), rounded once back to x's dtype; the rest pass."""
    dr = cos.shape[-1]
    r = x[..., :dr].float()
    r1, r2 = r.chunk(2, -1)
    r = r * cos + torch.cat([-r2, r1], -1) * sin
    return torch.cat([r.to(x.dtype), x[..., dr:]], -1)


def block(sd, p, x, cos, sin, cfg):
    """Pre-norm TransformerBlock with LayerScale on the float32 residual x [B, N, D]."""
    B, N, D = x.shape
    H, dh, eps = cfg["heads"], cfg["dim_head"], cfg["eps"]
    n1 = F.rms_norm(x, (D,), sd[p + "norm1.weight"].float(), eps)
    # to_qkv viewed [B, N, heads, 3 dh]: per head [q_h | k_h | v_h], not [Q | K | V] blocks.
    q, k, v = linear(sd, p + "attn.to_qkv.", n1).view(B, N, H, 3 * dh).split(dh, -1)
    q = rope(F.rms_norm(q.float(), (dh,), None, eps).to(v.dtype), cos, sin)
    k = rope(F.rms_norm(k.float(), (dh,), None, eps).to(v.dtype), cos, sin)
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    o = o.transpose(1, 2).reshape(B, N, D)
    x = x + linear(sd, p + "attn.to_out.", o) * sd[p + "scale1"].float()
    gate, up = linear(sd, p + "ff.w1.", F.rms_norm(x, (D,), sd[p + "norm2.weight"].float(), eps)).chunk(2, -1)
    return x + linear(sd, p + "ff.w2.", F.silu(gate) * up) * sd[p + "scale2"].float()


def decode_tile(sd, z, cfg, points=None):
    """decode(tile): post_quant_conv then ViT3DDecoder on z [B, Z, t, h, w] (float32) -> video
    [B, C, 4t, 16h, 16w] float32. Each tile gets its own length-normalised RoPE coordinates."""
    def point(name, v):
        if points is not None:
            points[name] = v
    x = F.conv3d(z, sd["post_quant_conv.weight"], sd["post_quant_conv.bias"])
    point("after_post_quant_conv", x)
    B, _, t, h, w = x.shape
    x = linear(sd, "decoder.x_embedder.", x.flatten(2).transpose(1, 2))
    point("after_x_embedder", x)
    D = x.shape[-1]
    x = torch.cat([x, sd["decoder.register_tokens"].float().expand(B, -1, -1), x.new_zeros(B, 1, D)], 1)
    cos, sin = rope_tables(cfg, t, h, w, x.device)
    for i in range(cfg["num_layers"]):
        x = block(sd, f"decoder.transformer_blocks.{i}.", x, cos, sin, cfg)
        point(f"after_block{i}", x)
    x = F.layer_norm(x, (D,), sd["decoder.norm_out.weight"], sd["decoder.norm_out.bias"], cfg["eps"])
    point("after_norm_out", x)
    y = linear(sd, "decoder.proj_out.", x[:, : t * h * w])
    C, rt, r = cfg["out_ch"], cfg["ratio_t"], cfg["ratio"]
    # feature index c * rt r r + pt * r r + ph * r + pw
    y = y.view(B, t, h, w, C, rt, r, r).permute(0, 4, 1, 5, 2, 6, 3, 7)
    return y.reshape(B, C, rt * t, r * h, r * w)


def blend(a, b, e, dim):
    """b with its first e entries along dim cross-faded from a's last e: weight k / e on b."""
    if e <= 0:
        return b
    shape = [1] * b.ndim
    shape[dim] = e
    k = (torch.arange(e, device=b.device, dtype=torch.float32) / e).view(shape)
    head = a.narrow(dim, a.shape[dim] - e, e) * (1 - k) + b.narrow(dim, 0, e) * k
    return torch.cat([head.to(b.dtype), b.narrow(dim, e, b.shape[dim] - e)], dim)


def split_tiles(length, tile, overlap_min, ratio):
    """Tile starts, tile length and the overlaps (pixels) of one axis: the fewest tiles with
    overlaps >= overlap_min, the surplus spread 16 px at a time round-robin over the overlaps."""
    if not tile or tile >= length:
        return [0], length, []
    n = -(-length // tile)
    while tile * n - overlap_min * (n - 1) - length < 0:
        n += 1
    ov = [overlap_min] * (n - 1)
    for u in range((tile * n - overlap_min * (n - 1) - length) // ratio):
        ov[u % (n - 1)] += ratio
    starts = [0]
    for o in ov:
        starts.append(starts[-1] + tile - o)
    return starts, tile, ov


def decode_chunk(sd, z, cfg, tile, overlap_min, points=None):
    """tiled_decode: every tile decoded on its own, then each blended with the unblended tile above
    and the unblended tile to its left, cropped by the overlaps it shares with the next ones."""
    r = cfg["ratio"]
    ys, th, yo = split_tiles(z.shape[-2] * r, tile, overlap_min, r)
    xs, tw, xo = split_tiles(z.shape[-1] * r, tile, overlap_min, r)
    grid = [[decode_tile(sd, z[..., y // r: (y + th) // r, x // r: (x + tw) // r], cfg,
                         points if i == j == 0 else None) for j, x in enumerate(xs)] for i, y in enumerate(ys)]
    if len(ys) == len(xs) == 1:
        return grid[0][0]
    rows = []
    for i in range(len(ys)):
        row = []
        for j in range(len(xs)):
            cur = grid[i][j]
            if i:
                cur = blend(grid[i - 1][j], cur, min(th, yo[i - 1]), -2)
            if j:
                cur = blend(grid[i][j - 1], cur, min(tw, xo[j - 1]), -1)
            row.append(cur[..., : th - yo[i] if i + 1 < len(ys) else th, : tw - xo[j] if j + 1 < len(xs) else tw])
        rows.append(torch.cat(row, -1))
    return torch.cat(rows, -2)


def decode(sd, z, mean, std, cfg, tile=None, overlap_min=None, points=None):
    """decode_base: de-normalise in float32, temporal chunks of K + O latent frames (the latent padded
    with copies of its last frame), each chunk's first K ratio_t frames less P written with the
    pending overlap cross-faded over their first F, the rest less P pending; the padding's frames cut.
    tile / overlap_min in pixels (default: cfg's; 0 = untiled). Returns float32 [B, C, frames, H, W]."""
    tile = cfg["tile_size"] if tile is None else tile
    overlap_min = cfg["tile_overlap_min"] if overlap_min is None else overlap_min
    zd = z.float() * std.float().view(1, -1, 1, 1, 1) + mean.float().view(1, -1, 1, 1, 1)
    if points is not None:
        points["latent_denorm"] = zd
    T, r, cl, td = zd.shape[2], cfg["ratio_t"], cfg["clip_length"], cfg["token_drop"]
    K = -(-cl // r)
    P, O = (-cl) % r, (-td) % K
    Fo, cd = max(O * r - P, 0), K * r
    # As if token_drop more latent frames had been encoded, padded to whole chunks.
    pseudo = T + td
    pad = (K - pseudo % K) % K
    chunks = (pseudo + pad) // K - (1 if td > 0 else 0)
    assert chunks >= 1, f"{T} latent frames make no temporal chunk"
    if pad:
        zd = torch.cat([zd] + [zd[:, :, -1:]] * pad, 2)
    parts, pending = [], None
    for i in range(chunks):
        zc = zd[:, :, i * K: i * K + K + O]
        pts = {} if points is not None and i == 0 else None
        out = decode_chunk(sd, zc, cfg, tile, overlap_min, pts)
        if points is not None:
            points[f"clip{i}_latent"] = zc
            if i == 0:
                points.update({f"clip0_{k}": v for k, v in pts.items()})
                points["clip0_decoded"] = out
        first = out[:, :, P:cd]
        if pending is not None:
            first = blend(pending, first, min(pending.shape[2], first.shape[2], Fo), 2)
        parts.append(first)
        pending = out[:, :, cd + P:] if td > 0 else None
    if pending is not None:
        parts.append(pending)
    video = torch.cat(parts, 2)
    # A padding token that starts a clip made clip_length mod ratio_t frames, any other ratio_t.
    pad_frames = sum(cl % r if cl % r and (T + k) % K == 0 else r for k in range(pad))
    return video[:, :, : video.shape[2] - pad_frames]


def random_weights(cfg, device, dtype, seed=0):
    """A state dict under the fixture's names at cfg's size, made on the device with the fixture's
    rules (weights N(0, 1) / sqrt(fan_in), biases 0.05 N, norm weights 1 + 0.1 N, register tokens
    0.5 N, LayerScale 0.5 + 0.1 N: the reference's zeros would switch the blocks off). The blocks'
    linears in dtype (the autocast region), the rest float32."""
    g = torch.Generator(device=device).manual_seed(seed)
    Z, D = cfg["z_channels"], cfg["heads"] * cfg["dim_head"]
    n = lambda *s: torch.randn(s, generator=g, device=device)  # noqa: E731
    sd = {}

    def lin(p, cout, cin, dt=torch.float32):
        sd[p + "weight"] = (n(cout, cin) / cin ** 0.5).to(dt)
        sd[p + "bias"] = (0.05 * n(cout)).to(dt)
    lin("post_quant_conv.", Z, Z)
    sd["post_quant_conv.weight"] = sd["post_quant_conv.weight"].view(Z, Z, 1, 1, 1)
    lin("decoder.x_embedder.", D, Z)
    sd["decoder.register_tokens"] = 0.5 * n(1, cfg["num_register_tokens"], D)
    sd["decoder.mask_token"] = torch.zeros(1, 1, D, device=device)  # a buffer the decode never reads
    for i in range(cfg["num_layers"]):
        p = f"decoder.transformer_blocks.{i}."
        sd[p + "norm1.weight"], sd[p + "norm2.weight"] = 1 + 0.1 * n(D), 1 + 0.1 * n(D)
        lin(p + "attn.to_qkv.", 3 * D, D, dtype)
        lin(p + "attn.to_out.", D, D, dtype)
        lin(p + "ff.w1.", 8 * D, D, dtype)
        lin(p + "ff.w2.", D, 4 * D, dtype)
        sd[p + "scale1"], sd[p + "scale2"] = 0.5 + 0.1 * n(D), 0.5 + 0.1 * n(D)
    sd["decoder.norm_out.weight"], sd["decoder.norm_out.bias"] = 1 + 0.1 * n(D), 0.05 * n(D)
    lin("decoder.proj_out.", cfg["out_ch"] * cfg["ratio_t"] * cfg["ratio"] ** 2, D)
    return sd


def bench_setup(frames, height, width, device, dtype, cfg=PRODUCTION, seed=0):
    """Random cfg-size weights and a random latent [1, 24, 1 + (frames - 1) / 4, height / 16,
    width / 16] in dtype, as `avdit bench vae --decoder h3video` builds its clip. Returns
    (decode_fn, latent_shape, param_count); decode_fn(z=None) decodes z (default: that latent) with
    the production chunking and 256/64 px tiling, under no_grad, the video left on the device."""
    r, rt = cfg["ratio"], cfg["ratio_t"]
    assert (frames - 1) % rt == 0 and height % r == 0 and width % r == 0, "frames 1 + 4k, sizes / 16"
    shape = (1, cfg["z_channels"], 1 + (frames - 1) // rt, height // r, width // r)
    assert shape[2] >= 3, "the H3 video VAE decodes at least 3 latent frames (--frames 9)"
    sd = random_weights(cfg, device, dtype, seed)
    # Identity statistics: the de-normalisation costs the same whatever its constants.
    mean = torch.zeros(cfg["z_channels"], device=device)
    std = torch.ones(cfg["z_channels"], device=device)
    g = torch.Generator(device=device).manual_seed(seed + 1)
    z0 = torch.randn(shape, generator=g, device=device).to(dtype)

    @torch.no_grad()
    def decode_fn(z=None):
        return decode(sd, z0 if z is None else z, mean, std, cfg)
    return decode_fn, shape, sum(t.numel() for t in sd.values())


def golden_config(g):
    """The fixture's config.json (both release files' contents) as this file's cfg."""
    outer, src = g["config.json (outer wrapper, as loaded)"], g["source/config.json (tiny)"]
    v = src["vit_decoder_kwargs"]
    return {"z_channels": src["z_channels"], "out_ch": src["out_ch"], "ratio": math.prod(src["space_down"]),
            "ratio_t": math.prod(src["time_down"]), "heads": v["heads"], "dim_head": v["dim_head"],
            "num_layers": v["num_layers"], "num_register_tokens": v.get("num_register_tokens", 4),
            "rope_dim_ratio": v["rope_dim_ratio"], "rope_theta": v["rope_theta"], "eps": v.get("eps", 1e-5),
            "clip_length": outer["vae_clip_length"], "token_drop": outer["vae_token_drop"],
            "tile_size": outer["vae_tile_size"] if outer["vae_decoder_tiling"] else 0,
            "tile_overlap_min": outer["vae_tile_overlap_min"]}


def check(golden, device):
    g, sd, inp, want = open_golden(golden, device)
    cfg = golden_config(g)
    points = {}
    tv = g["tiled_variant"]
    with torch.no_grad():
        points["video"] = decode(sd, inp["latent"], inp["latents_mean"], inp["latents_std"], cfg, points=points)
        points["video_tiled"] = decode(sd, inp["latent"], inp["latents_mean"], inp["latents_std"], cfg,
                                       tv["decoder_tile_size"], tv["decoder_tile_overlap_min"])
    return check_points(points, want)


if __name__ == "__main__":
    golden_main(check, "vae-h3video-tiny")
