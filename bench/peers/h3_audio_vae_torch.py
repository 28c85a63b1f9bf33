#!/usr/bin/env python3
"""MiniMax-H3's audio VAE decode (DacAudioVAE.decode: dec_in_proj, then a BigVGAN decoder with
anti-aliased SnakeBeta activations, 32 latent channels at 40 Hz -> 32 kHz) in PyTorch: the peer of
`avdit bench vae --decoder h3audio` (issue 32), written from the decode procedure of
../shared/golden/vae-h3audio-tiny/README.md (no library ships this decoder). Functional: the
weights are a state dict under the reference's names (`dec_in_proj.*`, `decoder.*`), the widths are
read from them, so the fixture's tiny weights and random production-size ones run the same code.

    h3_audio_vae_torch.py --check GOLDEN_DIR [--device cpu|cuda]
        decodes the fixture's latent with its weights in float32 and prints max |peer - golden| /
        max |golden| of `waveform` and of every intermediate the fixture stores (the README's bar
        for float32: 1e-4); exit 1 above it. Run this before trusting the peer's timings.

vae_peer.py calls `bench_setup(seconds, device, dtype)` for the timed, full-size runs.
"""
import math

import torch
import torch.nn.functional as F

from h3_peer import check_points, golden_main, open_golden  # the peers' shared pieces (torch only)

# The release: metadata.json's widths (latent_dim 2048, decoder_dim 1024) and the BigVGAN schedule
# dac_audio_vae.py hard-codes for 32 kHz (the release loader takes neither from config.json).
PRODUCTION = {"latent_channels": 32, "latent_dim": 2048, "decoder_dim": 1024, "sample_rate": 32000,
              "upsample_rates": [5, 5, 2, 2, 2, 2, 2], "upsample_kernel_sizes": [9, 9, 4, 4, 4, 4, 4],
              "resblock_kernel_sizes": [3, 7, 11], "resblock_dilation_sizes": [[1, 3, 5]] * 3,
              "alias_free_kernel": 12}
HOP = 800  # 5 * 5 * 2^5 output samples per latent frame
RATIO = 2  # Activation1d's up / down ratio


def kaiser_sinc(kernel, cutoff=0.5 / RATIO, half_width=0.6 / RATIO):
    """The anti-aliasing low-pass (README: Kaiser window times a sinc, normalised to sum 1), made
    here for random weights; the fixture's are state-dict buffers and are compared with this."""
    half = kernel // 2
    a = 2.285 * (half - 1) * math.pi * 4 * half_width + 7.95
    beta = 0.1102 * (a - 8.7) if a > 50 else 0.5842 * (a - 21) ** 0.4 + 0.07886 * (a - 21) if a >= 21 else 0.0
    win = torch.kaiser_window(kernel, periodic=False, beta=beta, dtype=torch.float64)
    t = torch.arange(-half, half, dtype=torch.float64) + 0.5 if kernel % 2 == 0 else \
        torch.arange(kernel, dtype=torch.float64) - half
    f = 2 * cutoff * win * torch.sinc(2 * cutoff * t)
    return (f / f.sum()).float().view(1, 1, kernel)


def fold(sd):
    """The checkpoint -> the tensors a deployed decoder keeps, once at load: weight norm
    w = g v / |v| (norm over all dims but 0: per output channel of a Conv1d, per input channel of
    a ConvTranspose1d), SnakeBeta's exp(alpha) and 1 / (exp(beta) + 1e-9) as [C, 1] columns, and the
    up-sampler's gain of `ratio` in its filter (a power of two: exact). Everything else as is."""
    w = {}
    for k, t in sd.items():
        if k.endswith(".parametrizations.weight.original0"):
            p = k[: -len(".parametrizations.weight.original0")]
            v = sd[p + ".parametrizations.weight.original1"]
            w[p + ".weight"] = t * v / v.norm(dim=tuple(range(1, v.dim())), keepdim=True)
        elif k.endswith(".parametrizations.weight.original1"):
            continue
        elif k.endswith(".act.alpha"):
            w[k] = torch.exp(t).view(-1, 1)
        elif k.endswith(".act.beta"):
            w[k] = (torch.exp(t) + 1e-9).reciprocal().view(-1, 1)
        elif k.endswith(".upsample.filter"):
            w[k] = RATIO * t
        else:
            w[k] = t
    return w


def activation(w, p, x):
    """Activation1d(SnakeBeta): x2 up-sampling (replicate-pad, depthwise transposed conv, crop),
    x + sin(a x)^2 / b, x2 down-sampling (replicate-pad, depthwise strided conv). x [B, C, T]."""
    C = x.shape[1]
    up, down = w[p + ".upsample.filter"], w[p + ".downsample.lowpass.filter"]
    k = up.shape[-1]
    pad = k // RATIO - 1
    crop_l = pad * RATIO + (k - RATIO) // 2
    crop_r = pad * RATIO + (k - RATIO + 1) // 2
    x = F.conv_transpose1d(F.pad(x, (pad, pad), mode="replicate"), up.expand(C, -1, -1), stride=RATIO, groups=C)
    x = x[..., crop_l: x.shape[-1] - crop_r]
    x = x + w[p + ".act.beta"] * torch.sin(w[p + ".act.alpha"] * x).pow(2)
    kd = down.shape[-1]
    x = F.pad(x, (kd // 2 - (kd % 2 == 0), kd // 2), mode="replicate")
    return F.conv1d(x, down.expand(C, -1, -1), stride=RATIO, groups=C)


def amp_block(w, p, x, dilations):
    """AMPBlock1: x = x + convs2[n](act(convs1[n](act(x)))), convs1 dilated, 'same' padding."""
    for n, d in enumerate(dilations):
        c1, c2 = f"{p}.convs1.{n}.", f"{p}.convs2.{n}."
        k = w[c1 + "weight"].shape[-1]
        t = activation(w, f"{p}.activations.{2 * n}", x)
        t = F.conv1d(t, w[c1 + "weight"], w[c1 + "bias"], padding=d * (k - 1) // 2, dilation=d)
        t = activation(w, f"{p}.activations.{2 * n + 1}", t)
        t = F.conv1d(t, w[c2 + "weight"], w[c2 + "bias"], padding=(k - 1) // 2)
        x = t + x
    return x


def decode(w, z, mean, std, cfg, points=None):
    """DacAudioVAE.decode(z * std + mean) on folded weights `w` (see fold): z [B, 32, T] (one row
    per output channel, the adapter's stereo rows) -> waveform [B, 1, 800 T] in [-1, 1]. The
    adapter's permute(1, 0, 2) to [1, B, 800 T] is left to the caller (a view)."""
    def point(name, t):
        if points is not None:
            points[name] = t
    x = z * std.view(1, -1, 1) + mean.view(1, -1, 1)
    point("latent_denorm", x)
    x = F.conv1d(x, w["dec_in_proj.weight"], w["dec_in_proj.bias"])
    point("after_dec_in_proj", x)
    x = F.conv1d(x, w["decoder.conv_pre.weight"], w["decoder.conv_pre.bias"], padding=3)
    point("after_conv_pre", x)
    nk = len(cfg["resblock_kernel_sizes"])
    for i, (u, k) in enumerate(zip(cfg["upsample_rates"], cfg["upsample_kernel_sizes"])):
        x = F.conv_transpose1d(x, w[f"decoder.ups.{i}.0.weight"], w[f"decoder.ups.{i}.0.bias"],
                               stride=u, padding=(k - u) // 2)
        point(f"stage{i}_after_up", x)
        xs = None
        for j in range(nk):
            r = amp_block(w, f"decoder.resblocks.{i * nk + j}", x, cfg["resblock_dilation_sizes"][j])
            xs = r if xs is None else xs + r
        x = xs / nk
        point(f"stage{i}_out", x)
    x = activation(w, "decoder.activation_post", x)
    x = F.conv1d(x, w["decoder.conv_post.weight"], None, padding=3)  # use_bias_at_final False
    point("after_conv_post", x)
    x = torch.clamp(x, -1.0, 1.0)  # use_tanh_at_final False
    point("waveform", x)
    return x


def random_weights(cfg, device, dtype, seed=0):
    """A state dict at cfg's widths under the reference's names (weight norm as g / v pairs, the
    filters as buffers), drawn as the fixture's are: v = N, g such that w ~ N(0, 1) gain / sqrt(fan_in)
    (gains 0.3 for convs2 and conv_post, 0.85 for the up-samplers), biases 0.05 N, log-scale SnakeBeta
    alpha, beta = 0.2 N; made on the device, so stage outputs stay O(1) and the clamp rarely bites."""
    g = torch.Generator(device=device).manual_seed(seed)
    rn = lambda *s: torch.randn(s, generator=g, device=device)  # noqa: E731
    sd = {}
    filt = kaiser_sinc(cfg["alias_free_kernel"]).to(device)

    def wn(p, shape, fan_in, gain=1.0, bias=True):
        v = rn(*shape)
        n = v.numel() // shape[0]
        sd[p + ".parametrizations.weight.original0"] = gain / fan_in ** 0.5 * n ** 0.5 * (1 + 0.1 * rn(shape[0], 1, 1))
        sd[p + ".parametrizations.weight.original1"] = v
        if bias:
            sd[p + ".bias"] = 0.05 * rn(shape[1] if ".ups." in p else shape[0])

    def act(p, C):
        sd[p + ".act.alpha"], sd[p + ".act.beta"] = 0.2 * rn(C), 0.2 * rn(C)
        sd[p + ".upsample.filter"], sd[p + ".downsample.lowpass.filter"] = filt.clone(), filt.clone()
    L, D = cfg["latent_dim"], cfg["decoder_dim"]
    sd["dec_in_proj.weight"] = rn(L, cfg["latent_channels"], 1) / cfg["latent_channels"] ** 0.5
    sd["dec_in_proj.bias"] = 0.05 * rn(L)
    wn("decoder.conv_pre", (D, L, 7), L * 7)
    C, nk = D, len(cfg["resblock_kernel_sizes"])
    for i, (u, k) in enumerate(zip(cfg["upsample_rates"], cfg["upsample_kernel_sizes"])):
        wn(f"decoder.ups.{i}.0", (C, C // 2, k), C * k / u, 0.85)  # ConvTranspose1d: [in, out, k]
        C //= 2
        for j, kr in enumerate(cfg["resblock_kernel_sizes"]):
            p = f"decoder.resblocks.{i * nk + j}"
            for n in range(len(cfg["resblock_dilation_sizes"][j])):
                wn(f"{p}.convs1.{n}", (C, C, kr), C * kr)
                wn(f"{p}.convs2.{n}", (C, C, kr), C * kr, 0.3)
            for n in range(2 * len(cfg["resblock_dilation_sizes"][j])):
                act(f"{p}.activations.{n}", C)
    act("decoder.activation_post", C)
    wn("decoder.conv_post", (1, C, 7), C * 7, 0.3, bias=False)
    return {k: t.to(dtype) for k, t in sd.items()}


def latent_frames(seconds):
    """`avdit bench vae --decoder h3audio --seconds S` (app/bench_vae.cpp clip_for): ceil(S * 32000 / 800), at least 1."""
    return max(1, math.ceil(seconds * PRODUCTION["sample_rate"] / HOP))


def bench_setup(seconds, device="cuda", dtype=torch.float32, seed=0):
    """For vae_peer.py: (decode_fn, latent_shape, param_count) at the release widths with random
    weights (folded once here), and a random latent [1, 32, T] of `seconds` as avdit's bench makes
    it. decode_fn() decodes that latent on the device under no_grad and returns the waveform
    [1, 1, 800 T] there. The de-normalisation runs with mean 0, std 1 (its cost, not the release's
    statistics, is what the timing needs). param_count: the checkpoint's parameters (weight norm's
    g and v, biases, SnakeBeta's alpha and beta; not the filter buffers), as named_parameters()
    would count the reference's decode path."""
    cfg = PRODUCTION
    sd = random_weights(cfg, device, dtype, seed)
    params = sum(t.numel() for k, t in sd.items() if not k.endswith(".filter"))
    w = fold(sd)
    del sd
    shape = (1, cfg["latent_channels"], latent_frames(seconds))
    g = torch.Generator(device=device).manual_seed(seed + 1)
    z = torch.randn(shape, generator=g, device=device).to(dtype)
    mean = torch.zeros(shape[1], device=device, dtype=dtype)
    std = torch.ones(shape[1], device=device, dtype=dtype)

    def decode_fn():
        with torch.no_grad():
            return decode(w, z, mean, std, cfg)
    return decode_fn, shape, params


def check(golden, device):
    gcfg, sd, inp, want = open_golden(golden, device)
    cfg = dict(gcfg["bigvgan_conf_for_32000_hz (hard-coded in dac_audio_vae.py)"])
    # The filters this file makes for random weights against the fixture's buffers.
    filt = [t for k, t in sd.items() if k.endswith(".filter")]
    ref = kaiser_sinc(filt[0].shape[-1]).to(device)
    e = max((t - ref).abs().max().item() for t in filt) / ref.abs().max().item()
    print(f"filters ({len(filt)}) vs kaiser_sinc: max |diff| / max = {e:.2e}")
    w = fold(sd)
    points = {}
    with torch.no_grad():
        decode(w, inp["latent"], inp["latents_mean"], inp["latents_std"], cfg, points)
    return check_points(points, want, worst=e)


if __name__ == "__main__":
    golden_main(check, "vae-h3audio-tiny")
