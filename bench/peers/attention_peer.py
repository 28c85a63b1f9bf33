#!/usr/bin/env python3
"""Peer of `avdit bench attention`: torch SDPA on the same GPU at the same shapes, with the cuDNN
and the FlashAttention backends, plus the eager torch way to get sinks + the per-head gate (cuDNN
SDPA returning its log-sum-exp, then o * sigmoid(lse - sink) * sigmoid(gate)).

FLOPs: 4 L^2 Hq D (non-causal, QK^T and PV). Timing: CUDA events, warm-up, median of --iters.
Layout: q, k, v are [1, L, H, D] in memory (avdit's [L, H, D]) viewed as [1, H, L, D]. For the GQA
shape KV heads are expanded to the query heads before timing (torch's fused backends take equal
head counts; the expansion is not timed).

--check DIR: reads the cases `avdit bench attention --dump DIR` wrote and compares avdit's output
with a float64 torch implementation of the same semantics (softmax with the sink logit in the
denominator, per segment; then the sigmoid gate), and prints the torch bf16/fp16 path's own error
beside it.

--fa4-site DIR: also times FlashAttention-4's forward (flash_attn.cute.flash_attn_func, the sm90
kernel on Hopper) from the packages installed with `pip install --target DIR` (the wheels of
flash-attn-4 and nvidia-cutlass-dsl[cu13]; scripts/fa4_site.sh makes DIR). Rows "fa4" (plain) and,
for shapes with sinks, "fa4+sink" (its per-head learnable sink; it has no gate). Layout [1, L, H, D].

Usage: attention_peer.py [--len 16384,65536] [--dtype bf16,fp16] [--shapes preview,h3,refiner]
                         [--iters 10] [--json FILE] [--check DIR] [--fa4-site DIR]
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = {"preview": (24, 24, 128, True), "h3": (56, 56, 128, False), "refiner": (32, 8, 128, False)}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def time_ms(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return out


def cudnn_with_lse(q, k, v, scale):
    # (out, logsumexp [B, H, L], ...): the private op torch's cuDNN SDPA backend runs.
    r = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, False, False, scale=scale)
    return r[0], r[1].reshape(q.shape[0], q.shape[1], q.shape[2])


def sinks_gate_torch(q, k, v, scale, sinks, gate):
    # gate [1, H, L] (already transposed), sinks [H] fp32: the same semantics as avdit's pass.
    o, lse = cudnn_with_lse(q, k, v, scale)
    c = torch.sigmoid(lse.float() - sinks.view(1, -1, 1)) * torch.sigmoid(gate.float())
    return (o.float() * c.unsqueeze(-1)).to(o.dtype)


def load_fa4(site_dir):
    # FlashAttention-4 from a `pip install --target` folder; None (and why, on stderr) when it fails.
    if not site_dir:
        return None
    import site
    site.addsitedir(site_dir)
    try:
        from flash_attn.cute import flash_attn_func
    except Exception as e:  # an import error deep in the DSL's libraries is still "no FA4 here"
        print(f"# --fa4-site {site_dir}: flash_attn.cute did not import: {e}".splitlines()[0], file=sys.stderr)
        return None
    return flash_attn_func


def bench(args):
    rows = []
    dev = torch.device("cuda")
    fa4 = load_fa4(args.fa4_site)
    for name in args.shapes.split(","):
        hq, hkv, d, sg = SHAPES[name]
        for dts in args.dtype.split(","):
            dt = DTYPES[dts]
            for L in [int(x) for x in args.len.split(",")]:
                g = torch.Generator(device=dev).manual_seed(1)
                q = torch.randn(1, L, hq, d, device=dev, dtype=dt, generator=g).transpose(1, 2)
                k = torch.randn(1, L, hkv, d, device=dev, dtype=dt, generator=g).transpose(1, 2)
                v = torch.randn(1, L, hkv, d, device=dev, dtype=dt, generator=g).transpose(1, 2)
                k_kv, v_kv = k, v  # FA4 takes GQA as it is
                if hkv != hq:
                    k = k.repeat_interleave(hq // hkv, dim=1)
                    v = v.repeat_interleave(hq // hkv, dim=1)
                scale = 1.0 / math.sqrt(d)
                flop = 4.0 * L * L * hq * d
                if sg:  # drawn before any timing, so the values do not depend on which backends run
                    sinks = torch.randn(hq, device=dev, generator=g) * 2
                    gate = (torch.randn(1, L, hq, device=dev, generator=g) * 2).to(dt).transpose(1, 2)

                def measure(backend, fn, errors=(RuntimeError,)):
                    try:
                        ms = time_ms(fn, args.warmup, args.iters)
                    except errors as e:
                        print(f"# {name} {dts} L={L} {backend}: {e}".splitlines()[0], file=sys.stderr)
                        return
                    med = statistics.median(ms)
                    rows.append(dict(shape=name, dtype=dts, L=L, backend=backend, ms=med,
                                     spread=max(ms) - min(ms), tflops=flop / (med * 1e-3) / 1e12))

                for backend, kind in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
                    with sdpa_kernel(kind):  # outside the timed calls, as each one's launch would wait on it
                        measure(backend, lambda: F.scaled_dot_product_attention(q, k, v, scale=scale))
                if fa4 is not None:
                    # FA4 takes [B, L, H, D]: q, k, v above are views of exactly that memory.
                    q4, k4, v4 = (t.transpose(1, 2) for t in (q, k_kv, v_kv))
                    for backend, sk in [("fa4", None)] + ([("fa4+sink", sinks)] if sg else []):
                        # an error deep in the DSL's compiler is still "no FA4 figure here"
                        with torch.inference_mode():
                            measure(backend, lambda: fa4(q4, k4, v4, softmax_scale=scale, learnable_sink=sk),
                                    errors=(Exception,))
                if sg:
                    measure("cudnn+sinks+gate (eager)", lambda: sinks_gate_torch(q, k, v, scale, sinks, gate))
                del q, k, v, k_kv, v_kv
                torch.cuda.empty_cache()
    print(f"### torch {torch.__version__} SDPA peer on {torch.cuda.get_device_name()} "
          f"(cuDNN {torch.backends.cudnn.version()}), median of {args.iters}\n")
    print("| shape | dtype | L | backend | ms | spread ms | TFLOP/s |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['shape']} | {r['dtype']} | {r['L']} | {r['backend']} | {r['ms']:.2f} | {r['spread']:.2f} | "
              f"{r['tflops']:.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def load(path, dtype, shape):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    return torch.frombuffer(data, dtype=dtype).reshape(shape).clone()


def reference64(q, k, v, scale, cu, sinks, gate):
    # q [L, Hq, D], k, v [L, Hkv, D] float64; softmax over the segment's keys plus the sink logit.
    L, hq, d = q.shape
    hkv = k.shape[1]
    k = k.repeat_interleave(hq // hkv, dim=1)
    v = v.repeat_interleave(hq // hkv, dim=1)
    out = torch.empty_like(q)
    for a, b in zip(cu[:-1], cu[1:]):
        s = torch.einsum("qhd,khd->hqk", q[a:b], k[a:b]) * scale  # [H, n, n]
        if sinks is not None:
            s = torch.cat([s, sinks.view(hq, 1, 1).expand(hq, b - a, 1)], dim=-1)
        p = torch.softmax(s, dim=-1)[..., : b - a]
        out[a:b] = torch.einsum("hqk,khd->qhd", p, v[a:b])
    if gate is not None:
        out = out * torch.sigmoid(gate).unsqueeze(-1)
    return out


def nmse(a, b):
    return float(((a - b) ** 2).sum() / (b ** 2).sum())


def check(args):
    ok = True
    for case in sorted(os.listdir(args.check)):
        dirp = os.path.join(args.check, case)
        meta = json.load(open(os.path.join(dirp, "meta.json")))
        dt = DTYPES[meta["dtype"]]
        L, hq, hkv, d = meta["L"], meta["hq"], meta["hkv"], meta["d"]
        q = load(os.path.join(dirp, "q.bin"), dt, (L, hq, d))
        k = load(os.path.join(dirp, "k.bin"), dt, (L, hkv, d))
        v = load(os.path.join(dirp, "v.bin"), dt, (L, hkv, d))
        got = load(os.path.join(dirp, "out.bin"), dt, (L, hq, d)).double()
        sg = meta["sinks_gate"]
        sinks = load(os.path.join(dirp, "sinks.bin"), torch.float32, (hq,)).double() if sg else None
        gate = load(os.path.join(dirp, "gate.bin"), dt, (L, hq)).double() if sg else None
        ref = reference64(q.double(), k.double(), v.double(), meta["scale"], meta["cu_seqlens"], sinks, gate)
        # torch's own low-precision path on the GPU, segment by segment, for the scale of the error.
        qd, kd, vd = (t.cuda() for t in (q, k, v))
        if hkv != hq:
            kd, vd = kd.repeat_interleave(hq // hkv, dim=1), vd.repeat_interleave(hq // hkv, dim=1)
        tor = torch.empty_like(qd)
        cu = meta["cu_seqlens"]
        for a, b in zip(cu[:-1], cu[1:]):
            qs, ks, vs = (t[a:b].transpose(0, 1).unsqueeze(0) for t in (qd, kd, vd))
            if sg:
                o = sinks_gate_torch(qs, ks, vs, meta["scale"], sinks.float().cuda(),
                                     gate[a:b].to(dt).cuda().t().unsqueeze(0))
            else:
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    o = F.scaled_dot_product_attention(qs, ks, vs, scale=meta["scale"])
            tor[a:b] = o[0].transpose(0, 1)
        e_avdit, e_torch = nmse(got, ref), nmse(tor.double().cpu(), ref)
        bound = 5e-5 if meta["dtype"] == "bf16" else 2e-6
        good = e_avdit <= bound
        ok = ok and good
        print(f"check {case}: L={L} segments={len(cu) - 1} sinks+gate={sg}: nmse avdit {e_avdit:.2e}, "
              f"torch {meta['dtype']} {e_torch:.2e} (vs float64; bound {bound:.0e}) {'OK' if good else 'FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--len", default="16384,32768,65536,131072")
    ap.add_argument("--dtype", default="bf16,fp16")
    ap.add_argument("--shapes", default="preview,h3,refiner")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--fa4-site", default="", help="pip --target folder holding flash-attn-4 (optional)")
    ap.add_argument("--json", default="")
    ap.add_argument("--check", default="")
    args = ap.parse_args()
    if args.check:
        sys.exit(0 if check(args) else 1)
    bench(args)


if __name__ == "__main__":
    main()
