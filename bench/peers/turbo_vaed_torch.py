#!/usr/bin/env python3
"""MAGI-2's TurboVAED decode in PyTorch: the peer of `avdit bench vae --decoder turbo` (issue 32),
written from the decode procedure of ../shared/golden/vae-turbo-tiny/README.md (no library ships
this decoder). Functional: the weights are a state dict under the reference's names (`decoder.*`),
the structure is read from them, so the fixture's tiny weights and random production-size ones
run through the same code.

    turbo_vaed_torch.py --check GOLDEN_DIR [--device cpu|cuda]
        decodes the fixture's latent with its weights in float32 and prints max |peer - golden| /
        max |golden| of `video` and of window 0's intermediates (the README's bar for float32:
        1e-4); exit 1 above it. Run this before trusting the peer's timings.

vae_peer.py --decoder turbo uses `random_weights` and `decode` for the timed, full-size runs.
"""

import torch
import torch.nn.functional as F

from h3_peer import check_points, golden_main, open_golden  # the peers' shared pieces (torch only)

# Production architecture (TurboV3-Wan22-TinyShallow_7_7.json as the fixture README reports it).
PRODUCTION = {"decoder_block_out_channels": [64, 128, 256, 512], "decoder_layers_per_block": [2, 2, 2, 3, 3],
              "decoder_spatio_temporal_scaling": [False, True, True, True],
              "decoder_spatio_only": [False, True, False, False], "latent_channels": 48, "out_channels": 3,
              "patch_size": 2, "resnet_norm_eps": 1e-6, "first_chunk_size": 7, "step_size": 7,
              "temporal_compression_ratio": 4}
NORM_EPS = 1e-8  # norm1 / norm2 and the output norm; norm3 (the shortcut's) uses resnet_norm_eps


def conv(x, w, b):
    """TurboVAEDCausalConv3d (not causal): (kt - 1) / 2 copies of the edge frames in time on each
    side, zeros of k // 2 in space, then the convolution with bias. x [B, C, T, H, W]."""
    p = (w.shape[2] - 1) // 2
    if p:
        x = torch.cat([x[:, :, :1]] * p + [x] + [x[:, :, -1:]] * p, dim=2)
    return F.conv3d(x, w, b, padding=(0, w.shape[3] // 2, w.shape[4] // 2))


def rms(x, eps):
    """Weight-free RMSNorm over the channels, the variance in float32, cast back to x's dtype."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + eps)).to(x.dtype)


def resnet(sd, p, x, relu_first, eps3):
    h = rms(x, NORM_EPS)
    h = F.relu(h) if relu_first else F.silu(h)
    h = conv(h, sd[p + "conv1.conv.weight"], sd[p + "conv1.conv.bias"])
    h = conv(F.silu(rms(h, NORM_EPS)), sd[p + "conv2.conv.weight"], sd[p + "conv2.conv.bias"])
    if p + "conv_shortcut.conv.weight" in sd:
        x = conv(rms(x, eps3), sd[p + "conv_shortcut.conv.weight"], sd[p + "conv_shortcut.conv.bias"])
    return h + x


def upsample(sd, p, x, first_chunk):
    """WanResample: upsample3d (time_conv C -> 2C, frame 2t + n = channels [nC, (n+1)C), the first
    window drops frame 0) or upsample2d; then per frame nearest-exact x2 in float32 and a Conv2d."""
    B, C, T, H, W = x.shape
    if p + "time_conv.conv.weight" in sd:
        y = conv(x, sd[p + "time_conv.conv.weight"], sd[p + "time_conv.conv.bias"])
        x = y.view(B, 2, C, T, H, W).permute(0, 2, 3, 1, 4, 5).reshape(B, C, 2 * T, H, W)
        if first_chunk:
            x = x[:, :, 1:]
        T = x.shape[2]
    f = x.permute(0, 2, 1, 3, 4).reshape(B * T, C, H, W)
    f = F.interpolate(f.float(), scale_factor=2.0, mode="nearest-exact").to(x.dtype)
    f = F.conv2d(f, sd[p + "resample.1.weight"], sd[p + "resample.1.bias"], padding=1)
    return f.reshape(B, T, C, 2 * H, 2 * W).permute(0, 2, 1, 3, 4)


def count(sd, prefix):
    n = 0
    while f"{prefix}{n}.conv1.conv.weight" in sd:
        n += 1
    return n


def decoder(sd, z, first_chunk, eps3, points=None):
    """TurboVAEDDecoder3d.forward on one window z [B, 48, t, h, w] -> video [B, 3, frames, 16h', 16w']."""
    def point(name, t):
        if points is not None:
            points[name] = t
    x = conv(z, sd["decoder.conv_in.conv.weight"], sd["decoder.conv_in.conv.bias"])
    point("after_conv_in", x)
    for r in range(count(sd, "decoder.mid_block.resnets.")):
        x = resnet(sd, f"decoder.mid_block.resnets.{r}.", x, False, eps3)
    point("after_mid_block", x)
    j = 0
    while f"decoder.up_blocks.{j}.resnets.0.conv1.conv.weight" in sd:
        p = f"decoder.up_blocks.{j}."
        if p + "conv_in.conv1.conv.weight" in sd:
            x = resnet(sd, p + "conv_in.", x, False, eps3)
        up = p + "upsamplers.0."
        has_up = up + "resample.1.weight" in sd
        if has_up:
            x = upsample(sd, up, x, first_chunk)
        for r in range(count(sd, p + "resnets.")):
            x = resnet(sd, f"{p}resnets.{r}.", x, has_up, eps3)
        point(f"after_up_block{j}", x)
        j += 1
    x = conv(F.silu(rms(x, NORM_EPS)), sd["decoder.conv_out.conv.weight"], sd["decoder.conv_out.conv.bias"])
    point("after_conv_out", x)
    # unpatchify(2): video[c, f, 2h + a, 2w + b] = out[4c + 2b + a]
    B, C12, Fr, h, w = x.shape
    v = x.view(B, C12 // 4, 2, 2, Fr, h, w).permute(0, 1, 4, 5, 3, 6, 2).reshape(B, C12 // 4, Fr, 2 * h, 2 * w)
    point("output", v)
    return v


def decode(sd, z, mean, std, cfg, points=None):
    """TurboVAED.decode: de-normalise (float32 constants, back to z's dtype), then the sliding-window
    plan of the README (first window f + 1 frames, then windows of s with one frame of overlap each
    side, 4 output frames trimmed at each seam, the padding's frames dropped at the end)."""
    zd = (z.float() / (1.0 / std.view(1, -1, 1, 1, 1)) + mean.view(1, -1, 1, 1, 1)).to(z.dtype)
    T = zd.shape[2]
    f, s, tc = cfg["first_chunk_size"], cfg["step_size"], cfg["temporal_compression_ratio"]
    eps3 = cfg["resnet_norm_eps"]
    pad = f - T if T < f else (s - (T - f) % s) % s
    if pad:
        zd = torch.cat([zd] + [zd[:, :, -1:]] * pad, dim=2)
    n = T + pad
    window = [0]

    def run(zw, first):
        pts = {} if points is not None else None
        out = decoder(sd, zw, first, eps3, pts)
        if points is not None:
            points.update({f"window{window[0]}_input": zw})
            points.update({f"window{window[0]}_{k}": v for k, v in pts.items()})
        window[0] += 1
        return out
    if n == f:
        kept = [run(zd, True)]
    else:
        kept = [run(zd[:, :, : f + 1], True)[:, :, :-tc]]
        for i in range(f, n, s):
            last = i + s == n
            out = run(zd[:, :, i - 1: i + s if last else i + s + 1], False)
            kept.append(out[:, :, tc:] if last else out[:, :, tc:-tc])
    video = torch.cat(kept, dim=2)
    return video[:, :, : video.shape[2] - tc * pad] if pad else video


def random_weights(cfg, device, dtype, seed=0):
    """A production-size state dict (the names the fixture lists), conv weights N(0, 1) / sqrt(fan_in)
    and biases 0.05 N, made on the device."""
    g = torch.Generator(device=device).manual_seed(seed)
    sd = {}

    def add(p, cout, cin, k):
        fan = cin * k[0] * k[1] * (k[2] if len(k) > 2 else 1)
        sd[p + "weight"] = (torch.randn((cout, cin) + tuple(k), generator=g, device=device) / fan ** 0.5).to(dtype)
        sd[p + "bias"] = (0.05 * torch.randn(cout, generator=g, device=device)).to(dtype)

    def res(p, cin, cout):
        add(p + "conv1.conv.", cout, cin, (3, 3, 3))
        add(p + "conv2.conv.", cout, cout, (3, 3, 3))
        if cin != cout:
            add(p + "conv_shortcut.conv.", cout, cin, (1, 1, 1))
    ch = list(reversed(cfg["decoder_block_out_channels"]))
    layers = list(reversed(cfg["decoder_layers_per_block"]))
    st = list(reversed(cfg["decoder_spatio_temporal_scaling"]))
    so = list(reversed(cfg["decoder_spatio_only"]))
    add("decoder.conv_in.conv.", ch[0], cfg["latent_channels"], (3, 3, 3))
    for r in range(layers[0]):
        res(f"decoder.mid_block.resnets.{r}.", ch[0], ch[0])
    cin = ch[0]
    for j, cout in enumerate(ch):
        p = f"decoder.up_blocks.{j}."
        if cin != cout:
            res(p + "conv_in.", cin, cout)
        if st[j] or so[j]:
            if not so[j]:
                add(p + "upsamplers.0.time_conv.conv.", 2 * cout, cout, (3, 1, 1))
            add(p + "upsamplers.0.resample.1.", cout, cout, (3, 3))
        for r in range(layers[j + 1]):
            res(f"{p}resnets.{r}.", cout, cout)
        cin = cout
    add("decoder.conv_out.conv.", cfg["out_channels"] * cfg["patch_size"] ** 2, cin, (3, 3, 3))
    return sd


def check(golden, device):
    cfg, sd, inp, want = open_golden(golden, device)
    points = {}
    with torch.no_grad():
        points["video"] = decode(sd, inp["latent"], inp["latents_mean"], inp["latents_std"], cfg["config"], points)
    return check_points(points, want, skip_missing=True)  # the fixture keeps windows this check skips


if __name__ == "__main__":
    golden_main(check, "vae-turbo-tiny")
