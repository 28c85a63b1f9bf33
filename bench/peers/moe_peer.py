#!/usr/bin/env python3
"""PyTorch peer of `avdit bench moe`: the MAGI-2 MoE MLP sub-layer in bf16 with plain torch ops.

pre-norm ((1 + w) RMSNorm per modality, eps 1e-6) -> split linear -> router (fp32 logits, sigmoid +
expert_bias, torch.topk, L1 norm x route_scale) -> stable argsort by (head, expert) -> gather ->
torch._grouped_mm gate/up (N = 2 De, sliced at 768 groups: it refuses >= 1024) -> swiglu7 -> grouped
down -> weight -> combine (per (token, head) in ascending expert order, running bf16 sum: the same
rule as avdit and the CPU bf16 mode) -> merge linear; shared expert and per-modality shared experts
(swiglu7 on interleaved channels); residual adds in bf16.

Usage:
  python3 moe_peer.py --check FILE   # FILE from `avdit bench moe --dump-check FILE`: recompute, compare
  python3 moe_peer.py --tokens 16384,65536,131072 [--json OUT]
Our own script (no code from the official repository). Timed with CUDA events, median of --iters.
"""
import argparse
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

CEILING = 770.0
GROUP_SLICE = 768


def read_safetensors(path):
    """Minimal reader (the device image may lack the safetensors package)."""
    dt = {"F32": torch.float32, "BF16": torch.bfloat16, "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        buf = bytearray(data[a:b])
        t = torch.frombuffer(buf, dtype=dt[h["dtype"]]) if b > a else torch.empty(0, dtype=dt[h["dtype"]])
        out[name] = t.reshape(h["shape"]).clone()
    return out, meta


def swiglu7(g, l):
    g = g.float().clamp(max=7.0)
    l = l.float().clamp(-7.0, 7.0)
    return g * torch.sigmoid(1.702 * g) * (l + 1.0)


def rms_norm_1p(x, w_rows, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w_rows)).to(torch.bfloat16)


class Layer:
    """Weights: experts as K-major stacks for torch._grouped_mm (B passed as [G, K, N] views)."""

    def __init__(self, cfg, w):
        self.c = cfg
        H, E, D, De = cfg["heads"], cfg["experts"], cfg["head_dim"], cfg["expert_inter"]
        self.pre_norm = w["pre_norm"].float()
        self.split_w, self.merge_w = w["split_linear"], w["merge_linear"]
        self.gate = w["router_gate"].float().view(H, E, D)
        self.bias = w["expert_bias"].float().view(H, E)
        # [G, D, De] ([in, out]) -> gate|up concatenated along N, stored [G, 2De, D] (K-major)
        self.w_gu = torch.cat([w["experts_gate"], w["experts_up"]], dim=2).transpose(1, 2).contiguous()
        self.w_d = w["experts_down"].transpose(1, 2).contiguous()  # [G, D, De]
        self.sh1, self.sh2, self.ms1, self.ms2 = w["shared_fc1"], w["shared_fc2"], w["ms_fc1"], w["ms_fc2"]
        self.use_grouped = hasattr(torch, "_grouped_mm")

    def mm(self, a, b_kmajor, offs, offs_host, start):
        """One slice of <= 768 groups: a [rows, K] sorted by group, b [g, N, K], offs: row ends."""
        if self.use_grouped:
            return torch._grouped_mm(a, b_kmajor.transpose(1, 2), offs=offs)
        outs, lo = [], 0
        for g, end in enumerate(offs_host):
            hi = end - start
            if hi > lo:
                outs.append(a[lo:hi] @ b_kmajor[g].t())
            lo = hi
        return torch.cat(outs)

    def forward(self, x, counts, timers=None):
        c = self.c
        H, E, K, D, De = c["heads"], c["experts"], c["top_k"], c["head_dim"], c["expert_inter"]
        T = x.shape[0]
        st = timers or (lambda name: _Null())
        r = {}
        with st("pre-norm"):
            mod = torch.repeat_interleave(torch.arange(3, device=x.device), torch.tensor(counts, device=x.device))
            xn = rms_norm_1p(x, self.pre_norm[mod])
        with st("split linear"):
            split = F.linear(xn, self.split_w)
        with st("router + top-k"):
            logits = torch.einsum("thd,hed->the", split.view(T, H, D).float(), self.gate)
            scores = torch.sigmoid(logits)
            _, idx = torch.topk(scores + self.bias, K, dim=-1)
            sel = scores.gather(-1, idx)
            wts = sel / sel.abs().sum(-1, keepdim=True).clamp_min(1e-12) * c["route_scale"]
        with st("permutation (argsort)"):
            hh = torch.arange(H, device=x.device).view(1, H, 1)
            group = (hh * E + idx).reshape(-1)
            order = torch.argsort(group, stable=True)
            counts_g = torch.bincount(group, minlength=H * E)
            offs_host = torch.cumsum(counts_g, 0).tolist()  # host sync: slicing needs the row bounds
        with st("gather"):
            tok = order // (H * K)
            head = (order // K) % H
            xin = split.view(T, H, D)[tok, head]
        # Experts slice by slice (768 groups: torch._grouped_mm refuses >= 1024), so the [rows, 2 De]
        # intermediates of one slice only are alive; the activation in row chunks (fp32 temporaries).
        G = H * E
        y = torch.empty((xin.shape[0], D), dtype=torch.bfloat16, device=x.device)
        start = 0
        for g0 in range(0, G, GROUP_SLICE):
            g1 = min(G, g0 + GROUP_SLICE)
            end = offs_host[g1 - 1]
            if end == start:
                continue
            offs = torch.tensor([o - start for o in offs_host[g0:g1]], dtype=torch.int32, device=x.device)
            with st("gate/up"):
                gu = self.mm(xin[start:end], self.w_gu[g0:g1], offs, offs_host[g0:g1], start)
            with st("activation"):
                h = torch.empty((end - start, De), dtype=torch.bfloat16, device=x.device)
                for c0 in range(0, end - start, 1 << 18):
                    c1 = min(end - start, c0 + (1 << 18))
                    h[c0:c1] = swiglu7(gu[c0:c1, :De], gu[c0:c1, De:]).to(torch.bfloat16)
            with st("down"):
                y[start:end] = self.mm(h, self.w_d[g0:g1], offs, offs_host[g0:g1], start)
            del gu, h
            start = end
        with st("combine"):
            p = wts.reshape(-1)[order]
            rows = (p.unsqueeze(1) * y.float()).to(torch.bfloat16)
            inv = torch.empty_like(order)
            inv[order] = torch.arange(order.numel(), device=x.device)
            slot_rows = rows[inv].view(T, H, K, D)
            asc = torch.argsort(idx, dim=-1)  # ascending expert order per (token, head)
            slot_rows = slot_rows.gather(2, asc.unsqueeze(-1).expand(T, H, K, D))
            acc = slot_rows[:, :, 0]
            for k in range(1, K):
                acc = (acc.float() + slot_rows[:, :, k].float()).to(torch.bfloat16)
            experts = acc.reshape(T, H * D)
        with st("merge linear"):
            merge = F.linear(experts, self.merge_w)
        with st("shared expert"):
            u = F.linear(xn, self.sh1)
            shared = F.linear(swiglu7(u[:, 0::2], u[:, 1::2]).to(torch.bfloat16), self.sh2)
        with st("modality shared experts"):
            hid = x.shape[1]
            im2 = self.ms1.shape[0] // 3
            parts, row = [], 0
            for m in range(3):
                n = counts[m]
                if n:
                    um = F.linear(xn[row:row + n], self.ms1[m * im2:(m + 1) * im2])
                    parts.append(F.linear(swiglu7(um[:, 0::2], um[:, 1::2]).to(torch.bfloat16),
                                          self.ms2[m * hid:(m + 1) * hid]))
                row += n
            specific = torch.cat(parts)
        with st("residual adds"):
            shared_out = shared + specific
            out = merge + shared_out
        r.update(split=split, idx=idx, wts=wts, experts=experts, merge=merge, shared=shared_out, out=out,
                 counts_g=counts_g)
        return r


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


class StageTimer:
    """Events per stage name; a stage entered several times in one forward (the expert slices) is
    summed within that forward. Median over forwards."""

    def __init__(self):
        self.iters = []

    def begin(self):
        self.iters.append({})

    def __call__(self, name):
        cur = self.iters[-1]

        class Ctx:
            def __enter__(self):
                self.a = torch.cuda.Event(enable_timing=True)
                self.b = torch.cuda.Event(enable_timing=True)
                self.a.record()

            def __exit__(self, *exc):
                self.b.record()
                cur.setdefault(name, []).append((self.a, self.b))
                return False

        return Ctx()

    def medians(self):
        names = list(self.iters[0].keys())
        out = {}
        for n in names:
            v = sorted(sum(a.elapsed_time(b) for a, b in it[n]) for it in self.iters)
            out[n] = v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])
        return out


def nmse(a, b):
    a, b = a.double(), b.double()
    return ((a - b).pow(2).sum() / b.pow(2).sum().clamp_min(1e-300)).item()


def check(path):
    w, meta = read_safetensors(path)
    cfg = {k: int(v) for k, v in meta.items() if k != "route_scale"}
    cfg["route_scale"] = float(meta["route_scale"])
    dev = torch.device("cuda")
    w = {k: v.to(dev) for k, v in w.items()}
    layer = Layer(cfg, w)
    mod = w["modality"].long()
    counts = [int((mod == m).sum()) for m in range(3)]
    r = layer.forward(w["x"], counts)
    flips = (r["idx"].sort(-1).values != w["out_topk_indices"].long().sort(-1).values).any(-1).sum().item()
    res = {
        "split_nmse": nmse(r["split"], w["out_split"]),
        "routing_flips": flips,
        "routing_pairs": r["idx"].shape[0] * r["idx"].shape[1],
        "experts_nmse": nmse(r["experts"], w["out_experts"]),
        "shared_nmse": nmse(r["shared"], w["out_shared"]),
        "out_nmse": nmse(r["out"], w["out"]),
    }
    print("check against avdit (" + path + "): " + json.dumps(res))
    ok = res["out_nmse"] < 1e-4 and res["experts_nmse"] < 1e-3 and flips <= max(1, res["routing_pairs"] // 100)
    print("CHECK " + ("PASSED" if ok else "FAILED"))
    return ok


def bench(tokens, iters, warmup, json_path):
    dev = torch.device("cuda")
    torch.manual_seed(0)
    hidden, H, E, K, D, De, Is, Im = 3072, 12, 256, 6, 256, 1280, 1280, 1280
    cfg = dict(hidden=hidden, heads=H, experts=E, top_k=K, head_dim=D, expert_inter=De, shared_inter=Is,
               modality_inter=Im, route_scale=4.9)

    def u(shape, fan_in, dtype=torch.bfloat16):
        a = math.sqrt(3.0 / fan_in)
        return (torch.rand(shape, device=dev, dtype=torch.float32) * 2 - 1).mul_(a).to(dtype)

    bias = torch.zeros(H, E, device=dev)
    for h in range(H):
        for rank in range(32):
            bias[h, (rank + 37 * h) % E] = 0.07 * (1 - rank / 32)
    w = {
        "pre_norm": u((3, hidden), 300, torch.float32),
        "split_linear": u((hidden, hidden), hidden), "merge_linear": u((hidden, hidden), hidden),
        "router_gate": u((H * E, D), D, torch.float32), "expert_bias": bias.reshape(-1),
        "experts_gate": u((H * E, D, De), D), "experts_up": u((H * E, D, De), D), "experts_down": u((H * E, De, D), De),
        "shared_fc1": u((2 * Is, hidden), hidden), "shared_fc2": u((hidden, Is), Is),
        "ms_fc1": u((3 * 2 * Im, hidden), hidden), "ms_fc2": u((3 * hidden, Im), Im),
    }
    layer = Layer(cfg, w)
    del w["experts_gate"], w["experts_up"], w["experts_down"]
    torch.cuda.empty_cache()
    rows = []
    for T in tokens:
        x = (torch.rand((T, hidden), device=dev) * 2 - 1).mul_(math.sqrt(3.0)).to(torch.bfloat16)
        counts = [T * 3 // 4, T * 3 // 20, T - T * 3 // 4 - T * 3 // 20]
        for _ in range(warmup):
            r = layer.forward(x, counts)
        cg = r["counts_g"].float()
        ratio = (cg.max() / cg.mean()).item()
        timer = StageTimer()
        total = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            timer.begin()
            a.record()
            layer.forward(x, counts, timer)
            b.record()
            torch.cuda.synchronize()
            total.append(a.elapsed_time(b))
        S = T * H * K
        flops = {"split linear": 2 * T * hidden * hidden, "merge linear": 2 * T * hidden * hidden,
                 "router + top-k": 2 * T * H * E * D, "gate/up": 2 * S * D * 2 * De, "down": 2 * S * De * D,
                 "shared expert": 6 * T * hidden * Is, "modality shared experts": 6 * T * hidden * Im}
        med = lambda v: sorted(v)[len(v) // 2] if len(v) % 2 else 0.5 * (sorted(v)[len(v) // 2 - 1] + sorted(v)[len(v) // 2])
        core_names = ["router + top-k", "permutation (argsort)", "gather", "gate/up", "activation", "down", "combine"]
        core = 0.0
        for name, ms in timer.medians().items():
            if name in core_names:
                core += ms
            f = flops.get(name, 0)
            tf = f / (ms * 1e-3) / 1e12 if f else 0.0
            rows.append(dict(T=T, stage=name, ms=round(ms, 3), TFLOPs=round(f / 1e12, 3), TFLOP_per_s=round(tf, 1),
                             of_770=round(tf / CEILING, 3), max_mean_load=round(ratio, 2)))
        fe = 6 * S * D * De
        rows.append(dict(T=T, stage="ROUTED CORE (sum of its stages)", ms=round(core, 3), TFLOPs=round(fe / 1e12, 3),
                         TFLOP_per_s=round(fe / (core * 1e-3) / 1e12, 1), of_770=round(fe / (core * 1e-3) / 1e12 / CEILING, 3),
                         max_mean_load=round(ratio, 2)))
        ft = fe + 2 * 2 * T * hidden * hidden + 12 * T * hidden * Is + 2 * T * H * E * D
        mt = med(total)
        rows.append(dict(T=T, stage="SUB-LAYER (all)", ms=round(mt, 3), TFLOPs=round(ft / 1e12, 3),
                         TFLOP_per_s=round(ft / (mt * 1e-3) / 1e12, 1), of_770=round(ft / (mt * 1e-3) / 1e12 / CEILING, 3),
                         max_mean_load=round(ratio, 2)))
        del x, r
        torch.cuda.empty_cache()
    cols = list(rows[0].keys())
    print("## PyTorch peer: MAGI-2 MoE MLP sub-layer, bf16 (torch %s, grouped_mm %s)" % (torch.__version__, layer.use_grouped))
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r_ in rows:
        print("| " + " | ".join(str(r_[c]) for c in cols) + " |")
    print(json.dumps(rows))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", default="")
    ap.add_argument("--tokens", default="16384,65536,131072")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if a.check:
        sys.exit(0 if check(a.check) else 1)
    bench([int(t) for t in a.tokens.split(",")], a.iters, a.warmup, a.json)


if __name__ == "__main__":
    main()
