#!/usr/bin/env python3
"""Peer of `avdit bench vae`: for the two decoders a public PyTorch library implements, diffusers'
AutoencoderKLWan at the Wan2.2 VAE's release size (z 48, base 160, decoder base 256, residual
blocks, patch 2: the TI2V-5B VAE config) and AutoencoderOobleck at Stable Audio Open 1.0's; for
MAGI-2's TurboVAED and MiniMax-H3's two VAEs, which no library ships, turbo_vaed_torch.py,
h3_video_vae_torch.py and h3_audio_vae_torch.py (PyTorch from the golden READMEs' decode
procedures, each checked against its fixture by its --check) at the production architecture.
Random weights made on the GPU, random latents of the clip's shape, the median wall time of the
decode (CUDA-synchronised), the peak of torch's allocator and the parameter count (compare with
`avdit bench vae`'s folder). h3audio runs in fp32 only, as avdit's audio decoders do.

Oobleck's decode ends as MAGI-2's does (the golden's `waveform_44k`): the 441/512 time stretch onto
44.1 kHz, `scipy.signal.resample` on the host as the reference pipeline runs it (--stretch
reference; torch.fft on the GPU where scipy is missing, said in the row), or none (--stretch none:
diffusers' decoder alone).

Usage: vae_peer.py --decoder wan22|oobleck|turbo|h3video|h3audio [--device cuda|cpu] [--precision fp32|bf16] [--tf32] [--frames 81
                   --height 512 --width 896] [--seconds 10] [--stretch reference|none] [--iters 3]
                   [--warmup 1] [--json F]
wan22 and oobleck need diffusers (carried as a wheel: `pip install --no-deps --target /tmp/site
.whl/*.whl`).
"""
import argparse
import json
import math
import statistics
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--decoder", required=True, choices=["wan22", "oobleck", "turbo", "h3video", "h3audio"])
    p.add_argument("--device", default="cuda", help="cuda (the benchmark) or cpu (a shape check)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--frames", type=int, default=81)
    p.add_argument("--height", type=int, default=512)
    p.add_argument("--width", type=int, default=896)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--stretch", default="reference", choices=["reference", "none"],
                   help="oobleck: MAGI-2's 441/512 resample after the decode (the reference's scipy) or none")
    p.add_argument("--json")
    p.add_argument("--tf32", action="store_true",
                   help="let fp32 convolutions and matmuls round to TF32 (torch's cuDNN default); off: "
                        "exact fp32 as avdit's fp32 path computes")
    a = p.parse_args()
    # torch lets cuDNN convolutions use TF32 by default: an "fp32" peer would then run at TF32's
    # precision and rate while avdit's fp32 path multiplies in fp32. Same arithmetic unless --tf32.
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    dev, dt = a.device, torch.bfloat16 if a.precision == "bf16" else torch.float32
    torch.manual_seed(0)
    if a.decoder == "turbo":
        import turbo_vaed_torch as tv
        assert (a.frames - 1) % 4 == 0 and a.height % 16 == 0 and a.width % 16 == 0, "frames 1 + 4k, sizes / 16"
        sd = tv.random_weights(tv.PRODUCTION, dev, dt)
        mean, std = torch.zeros(48, device=dev), torch.ones(48, device=dev)
        decode = lambda z: tv.decode(sd, z, mean, std, tv.PRODUCTION)  # noqa: E731
        latent = (1, 48, (a.frames - 1) // 4 + 1, a.height // 16, a.width // 16)
        clip = f"{a.frames} x {a.width}x{a.height}"
        params = sum(t.numel() for t in sd.values())
    elif a.decoder == "h3video":
        import h3_video_vae_torch as hv
        fn, latent, params = hv.bench_setup(a.frames, a.height, a.width, dev, dt)
        decode = lambda z: fn(z)  # noqa: E731
        clip = f"{a.frames} x {a.width}x{a.height}"
    elif a.decoder == "h3audio":
        import h3_audio_vae_torch as ha
        fn, latent, params = ha.bench_setup(a.seconds, dev, torch.float32)
        decode = lambda z: fn()  # noqa: E731  (its own random latent of the same shape)
        clip = f"{a.seconds:g} s at 32000 Hz"
    elif a.decoder == "wan22":
        from diffusers import AutoencoderKLWan
        assert (a.frames - 1) % 4 == 0 and a.height % 16 == 0 and a.width % 16 == 0, "frames 1 + 4k, sizes / 16"
        with torch.device(dev):
            vae = AutoencoderKLWan(base_dim=160, decoder_base_dim=256, z_dim=48, dim_mult=[1, 2, 4, 4],
                                   num_res_blocks=2, attn_scales=[], temperal_downsample=[False, True, True],
                                   is_residual=True, in_channels=12, out_channels=12, patch_size=2,
                                   scale_factor_spatial=16, scale_factor_temporal=4,
                                   latents_mean=[0.0] * 48, latents_std=[1.0] * 48)
        latent = (1, 48, (a.frames - 1) // 4 + 1, a.height // 16, a.width // 16)
        clip = f"{a.frames} x {a.width}x{a.height}"
        params = sum(t.numel() for n, t in vae.named_parameters() if not n.startswith(("encoder.", "quant_conv.")))
    else:
        from diffusers import AutoencoderOobleck
        with torch.device(dev):
            vae = AutoencoderOobleck(encoder_hidden_size=128, downsampling_ratios=[2, 4, 4, 8, 8],
                                     channel_multiples=[1, 2, 4, 8, 16], decoder_channels=128,
                                     decoder_input_channels=64, audio_channels=2, sampling_rate=44100)
        latent = (1, 64, math.ceil(a.seconds * 44100 / 2048))
        clip = f"{a.seconds:g} s at 44100 Hz"
        params = sum(t.numel() for n, t in vae.named_parameters() if n.startswith("decoder."))
    stretch = "none"
    if a.decoder in ("wan22", "oobleck"):
        vae = vae.to(dtype=dt).eval()
        decode = lambda z: vae.decode(z).sample  # noqa: E731
    if a.decoder == "oobleck" and a.stretch == "reference":
        plain = decode
        try:
            import scipy.signal

            def decode(z):  # MAGI-2: audio to numpy [N, 2], scipy.signal.resample(a, int(N * 441 / 512))
                w = plain(z)[0].float().T.cpu().numpy()
                return torch.from_numpy(scipy.signal.resample(w, int(w.shape[0] * 441 / 512)).T.copy())
            stretch = "scipy.signal.resample (host)"
        except ImportError:
            def decode(z):  # the same FFT resample (scipy's formula) on the GPU
                w = plain(z)[0].float()
                n, m = w.shape[-1], int(w.shape[-1] * 441 / 512)
                return torch.fft.irfft(torch.fft.rfft(w, dim=-1)[..., : m // 2 + 1], n=m, dim=-1) * (m / n)
            stretch = "torch.fft (GPU; no scipy here)"
    z = torch.randn(latent, device=dev, dtype=dt)
    times = []
    cuda = dev.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():
        for i in range(a.warmup + a.iters):
            sync()
            t0 = time.perf_counter()
            out = decode(z)
            sync()
            if i >= a.warmup:
                times.append(time.perf_counter() - t0)
    s = statistics.median(times)
    frames = a.frames if a.decoder not in ("oobleck", "h3audio") else None
    own = {"turbo": "turbo_vaed_torch.py", "h3video": "h3_video_vae_torch.py", "h3audio": "h3_audio_vae_torch.py"}
    peer = (own[a.decoder] + ", torch " + torch.__version__ if a.decoder in own
            else "diffusers " + __import__("diffusers").__version__)
    row = {"decoder": a.decoder, "peer": peer,
           "precision": a.precision + (" (TF32)" if a.tf32 and a.precision == "fp32" else ""), "clip": clip, "latent": list(latent), "output": list(out.shape),
           "s": round(s, 4), "frames_per_s": round(frames / s, 2) if frames else None,
           "peak_gb": round(torch.cuda.max_memory_allocated() / 1e9, 2) if cuda else None, "decoder_params": params,
           "finite": bool(torch.isfinite(out).all()), "stretch": stretch}
    print("| " + " | ".join(str(v) for v in row.values()) + " |")
    if a.json:
        json.dump(row, open(a.json, "w"), indent=2)


if __name__ == "__main__":
    main()
