#!/usr/bin/env python3
"""Peer of `avdit bench h3`: the MiniMax-H3 DiT block stack in plain PyTorch, written the way the
public pure-PyTorch port runs it (bf16 weights and activations, fp32 output heads, F.rms_norm,
SDPA per cu_seqlens document, the adaLN projections computed in every forward), our own script.

Semantics (golden README "Forward pass", steps 3-6, from the packed hidden sequence on):
  per block: mod = adaln(silu(t_emb)) viewed [3M, 6H]; j = inverse * 3 + modality per row;
    h = rms(x; norm1) * (1 + scale_msa[j]) + shift_msa[j];  x += gate_msa[j] * Attn(h)
    h = rms(x; norm2) * (1 + scale_mlp[j]) + shift_mlp[j];  x += gate_mlp[j] * fc2(silu(g) * u)
  Attn: qkv grouped per head [S, heads, 3, 128]; per-head rms q/k; split-half RoPE on dims 0..95;
    softmax(q k^T / sqrt(128)) v inside each document; out_proj.
  final: rms(x; final_norm) * (1 + scale[inverse]) + shift[inverse] -> fp32 video / audio heads.

--check DIR: reads DIR/h3_check.safetensors (`avdit bench h3 --check DIR`: the h3-tiny golden's
packed bf16 inputs and avdit's bf16 outputs) and the golden's model.safetensors, runs this stack and
prints max |peer - avdit| / max |avdit| per output (exit 1 above --check-tol).

Timing (default): random bf16 weights made on the GPU at the config's full widths, synthetic
packed sequences of --rows rows (512 text rows, 372 audio rows, the rest video, two timesteps, one
document, as avdit's synthetic layout), CUDA events, --warmup then the median of --iters forwards.

Usage: h3_peer.py [--rows 19456,40128] [--iters 5] [--json FILE] [--check DIR --golden DIR]
"""
import argparse
import json
import math
import os
import statistics
import struct
import sys

import torch
import torch.nn.functional as F

DT = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "I64": torch.int64,
      "I32": torch.int32, "F64": torch.float64, "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(path):
    """A minimal reader (no dependency beyond torch): header length, JSON header, raw data."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=DT[info["dtype"]]) if b > a else torch.empty(0, dtype=DT[info["dtype"]])
        out[name] = t.reshape(info["shape"])
    return out


def open_golden(golden, device):
    """A decoder fixture for a peer's --check: (config.json, the model's tensors and the inputs on
    device, the outputs on the host), with TF32 off so that fp32 is fp32."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    cfg = json.load(open(os.path.join(golden, "config.json")))
    sd = {k: v.to(device) for k, v in read_safetensors(os.path.join(golden, "model.safetensors")).items()}
    inp = {k: v.to(device) for k, v in read_safetensors(os.path.join(golden, "inputs.safetensors")).items()}
    return cfg, sd, inp, read_safetensors(os.path.join(golden, "outputs.safetensors"))


def check_points(points, want, worst=0.0, skip_missing=False, bar=1e-4):
    """Each fixture tensor against the peer's of the same name (the peer's order, then the rest):
    max |peer - golden| / max |golden|, printed; returns the exit status, 0 when the worst (starting
    at `worst`) is within bar. A fixture tensor the peer does not compute fails unless
    skip_missing."""
    for name in [n for n in points if n in want] + [n for n in want if n not in points]:
        if name not in points:
            print(f"{name}: not computed here")
            worst = worst if skip_missing else float("inf")
            continue
        got, ref = points[name].float().cpu(), want[name]
        if got.shape != ref.shape:
            print(f"{name}: shape {list(got.shape)} against {list(ref.shape)}")
            worst = float("inf")
            continue
        e = ((got - ref).abs().max() / ref.abs().max()).item()
        worst = max(worst, e)
        print(f"{name}: max |peer - golden| / max |golden| = {e:.2e}")
    print(f"worst {worst:.2e} (bar {bar:g})")
    return 0 if worst <= bar else 1


def golden_main(check, fixture):
    """The peers' command line: --check GOLDEN_DIR [--device cpu|cuda]."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", required=True, help=f"the {fixture} golden folder")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    sys.exit(check(a.check, a.device))


def rms(x, w, eps):
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def rope(x, cos, sin):
    # x [S, heads, 128]; cos, sin [S, half]: dim i pairs with i + half on dims [0, 2 half).
    half = cos.shape[-1]
    c, s = cos[:, None, :], sin[:, None, :]
    x1, x2, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], dim=-1)


class Stack:
    """Weights: dict of block lists and final-layer tensors (bf16, heads fp32)."""

    def __init__(self, cfg, w):
        self.H = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.dh = cfg["attention_head_dim"]
        self.eps = cfg.get("norm_eps", 1e-5)
        self.qk_eps = cfg.get("qk_norm_eps", 1e-5)
        self.final_eps = cfg.get("final_norm_eps", 1e-5)
        self.w = w

    def forward(self, x, adaln_input, rows, inverse, cos, sin, docs, return_block0=False):
        H, heads, dh = self.H, self.heads, self.dh
        S = x.shape[0]
        a_in = adaln_input.to(torch.bfloat16)
        block0 = None
        for i, b in enumerate(self.w["blocks"]):
            mod = F.linear(a_in, b["adaln_w"], b["adaln_b"]).view(-1, 6, H)  # [3M, 6, H]
            sl = lambda s: mod[:, s][rows]  # noqa: E731  [S, H] per-row slice
            h = rms(x, b["norm1"], self.eps) * (1 + sl(1)) + sl(0)
            qkv = F.linear(h, b["qkv"]).view(S, heads, 3, dh)
            q, k, v = qkv.unbind(2)
            q = rope(rms(q, b["q_norm"], self.qk_eps), cos, sin)
            k = rope(rms(k, b["k_norm"], self.qk_eps), cos, sin)
            outs = []
            for (a, e) in docs:
                if e <= a:
                    continue
                qq, kk, vv = (t[a:e].transpose(0, 1).unsqueeze(0) for t in (q, k, v))
                outs.append(F.scaled_dot_product_attention(qq, kk, vv)[0].transpose(0, 1))
            attn = torch.cat(outs).reshape(S, heads * dh)
            x = x + sl(2) * F.linear(attn, b["out"])
            h = rms(x, b["norm2"], self.eps) * (1 + sl(4)) + sl(3)
            g, u = F.linear(h, b["fc1"]).chunk(2, dim=-1)
            x = x + sl(5) * F.linear(F.silu(g) * u, b["fc2"])
            if i == 0 and return_block0:
                block0 = x
        fm = F.linear(a_in, self.w["final_adaln_w"], self.w["final_adaln_b"]).view(-1, 2, H)
        h = rms(x, self.w["final_norm"], self.final_eps) * (1 + fm[:, 1][inverse]) + fm[:, 0][inverse]
        h = h.float()
        video = F.linear(h, self.w["video_w"], self.w["video_b"])
        audio = F.linear(h, self.w["audio_w"], self.w["audio_b"])
        return video, audio, block0


def load_golden(golden):
    cfg = json.load(open(os.path.join(golden, "config.json")))
    m = read_safetensors(os.path.join(golden, "model.safetensors"))
    bf = lambda n: m[n].to("cuda", torch.bfloat16)  # noqa: E731
    f32 = lambda n: m[n].to("cuda", torch.float32)  # noqa: E731
    blocks = []
    for i in range(cfg["num_layers"]):
        p = f"blocks.{i}."
        blocks.append({"norm1": bf(p + "norm1.weight"), "norm2": bf(p + "norm2.weight"),
                       "qkv": bf(p + "attn.qkv_proj.weight"), "q_norm": bf(p + "attn.q_norm.weight"),
                       "k_norm": bf(p + "attn.k_norm.weight"), "out": bf(p + "attn.out_proj.weight"),
                       "fc1": bf(p + "mlp.fc1.weight"), "fc2": bf(p + "mlp.fc2.weight"),
                       "adaln_w": bf(p + "adaln_proj.linear.weight"), "adaln_b": bf(p + "adaln_proj.linear.bias")})
    w = {"blocks": blocks, "final_norm": bf("final_layer.norm.weight"),
         "final_adaln_w": bf("final_layer.adaln_proj.linear.weight"),
         "final_adaln_b": bf("final_layer.adaln_proj.linear.bias"),
         "video_w": f32("final_layer.video_out.weight"), "video_b": f32("final_layer.video_out.bias"),
         "audio_w": f32("final_layer.audio_out.weight"), "audio_b": f32("final_layer.audio_out.bias")}
    return cfg, w


def check(args):
    cfg, w = load_golden(args.golden)
    d = read_safetensors(os.path.join(args.check, "h3_check.safetensors"))
    x = d["hidden_embed"].to("cuda", torch.bfloat16)
    S = x.shape[0]
    cs = d["rope_cos_sin_cache"].to("cuda", torch.float32)
    n = cs.shape[1] // 2
    cos, sin = cs[:, :n].to(torch.bfloat16), cs[:, n:].to(torch.bfloat16)  # the bf16 reference's cache
    cu = d["cu_seqlens"].tolist()
    docs = list(zip(cu[:-1], cu[1:]))
    with torch.no_grad():
        video, audio, b0 = Stack(cfg, w).forward(x, d["adaln_input"].to("cuda"), d["mod_rows"].to("cuda"),
                                                 d["inverse"].to("cuda"), cos, sin, docs, return_block0=True)
    worst = 0.0
    for name, got in (("hidden_block0", b0), ("final_video_all", video), ("final_audio_all", audio)):
        ref = d[name].to("cuda", torch.float32)
        rel = ((got.float() - ref).abs().max() / ref.abs().max()).item()
        worst = max(worst, rel)
        print(f"  check {name:16s} [{S} rows] max|peer - avdit| / max|avdit| = {rel:.3e}")
    ok = worst <= args.check_tol
    print(f"peer == avdit at the h3-tiny size (bf16, bound {args.check_tol}): {'yes' if ok else 'NO'}")
    return 0 if ok else 1


def random_weights(cfg, blocks):
    H, I, Fd, Dt = cfg["hidden_size"], cfg["num_attention_heads"] * cfg["attention_head_dim"], \
        cfg["ffn_hidden_size"], cfg["time_embed_dim"]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)

    def r(*shape, std=None, mean=0.0, dtype=torch.bfloat16):
        t = torch.randn(*shape, device="cuda", dtype=dtype, generator=gen)
        std = std if std is not None else 1 / math.sqrt(shape[-1])
        return t.mul_(std).add_(mean)

    bl = []
    for _ in range(blocks):
        bl.append({"norm1": r(H, std=0.1, mean=1.0), "norm2": r(H, std=0.1, mean=1.0), "qkv": r(3 * I, H),
                   "q_norm": r(128, std=0.1, mean=1.0), "k_norm": r(128, std=0.1, mean=1.0), "out": r(H, I),
                   "fc1": r(2 * Fd, H), "fc2": r(H, Fd), "adaln_w": r(18 * H, Dt, std=0.5 / math.sqrt(Dt)),
                   "adaln_b": r(18 * H, std=0.1)})
    return {"blocks": bl, "final_norm": r(H, std=0.1, mean=1.0),
            "final_adaln_w": r(2 * H, Dt, std=0.5 / math.sqrt(Dt)), "final_adaln_b": r(2 * H, std=0.1),
            "video_w": r(96, H, dtype=torch.float32), "video_b": r(96, std=0.02, dtype=torch.float32),
            "audio_w": r(32, H, dtype=torch.float32), "audio_b": r(32, std=0.02, dtype=torch.float32)}


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


def bench(args):
    cfg = json.load(open(args.config))
    blocks = args.blocks or cfg["num_layers"]
    H = cfg["hidden_size"]
    w = random_weights(cfg, blocks)
    wbytes = sum(t.numel() * t.element_size() for b in w["blocks"] for t in b.values()) + \
        sum(t.numel() * t.element_size() for k, t in w.items() if k != "blocks")
    print(f"peer: {blocks} blocks, weights {wbytes / 1e9:.2f} GB, torch {torch.__version__}")
    stack = Stack(cfg, w)
    results = []
    for rows in [int(r) for r in args.rows.split(",") if r]:
        text, audio = 512, 372
        tags = torch.zeros(rows, dtype=torch.int64)
        tags[:text] = 1
        tags[text:text + audio] = 2
        inverse = torch.zeros(rows, dtype=torch.int64)
        inverse[text:text + audio] = 1  # audio rows take the audio timestep
        mod_rows = (inverse * 3 + tags).cuda()
        inverse = inverse.cuda()
        pos = torch.arange(rows, device="cuda", dtype=torch.float32)[:, None]
        inv_freq = 1.0 / (10000 ** (torch.arange(0, 32, 2, device="cuda", dtype=torch.float32) / 32))
        ang = torch.cat([pos * inv_freq, (pos % 32) * inv_freq, (pos % 17) * inv_freq], dim=-1)
        cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
        x0 = torch.randn(rows, H, device="cuda", dtype=torch.bfloat16)
        adaln_input = F.silu(torch.randn(2, cfg["time_embed_dim"], device="cuda"))
        docs = [(0, rows)]
        torch.cuda.reset_peak_memory_stats()
        with torch.no_grad():
            ms = time_ms(lambda: stack.forward(x0, adaln_input, mod_rows, inverse, cos, sin, docs),
                         args.warmup, args.iters)
        peak = torch.cuda.max_memory_allocated()
        med = statistics.median(ms)
        print(f"peer rows {rows}: forward median {med / 1e3:.3f} s (min {min(ms) / 1e3:.3f}, max {max(ms) / 1e3:.3f}, "
              f"{len(ms)} runs), peak allocated {peak / 2**30:.1f} GiB")
        results.append({"rows": rows, "blocks": blocks, "forward_s": med / 1e3, "ms": ms,
                        "peak_gib": peak / 2**30, "weights_gb": wbytes / 1e9})
        del x0
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    # ../shared beside the repo, or shared/ inside it (the GPU machine's unpacked .carry).
    inside = os.path.join(here, "..", "..", "shared")
    shared = os.environ.get("AVDIT_SHARED_DIR", inside if os.path.isdir(inside) else os.path.join(here, "..", "..", "..", "shared"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="19456,40128")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--blocks", type=int, default=0)
    ap.add_argument("--config", default=os.path.join(shared, "reference-configs/h3/FL2VA/transformer/config.json"))
    ap.add_argument("--json", default="")
    ap.add_argument("--check", default="")
    ap.add_argument("--check-tol", type=float, default=5e-2)
    ap.add_argument("--golden", default=os.path.join(shared, "golden/h3-tiny"))
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    return check(args) if args.check else bench(args)


if __name__ == "__main__":
    sys.exit(main())
