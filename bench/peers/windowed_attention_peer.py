#!/usr/bin/env python3
"""Peer of `avdit bench windowed-attention`: the MAGI-2 refiner's windowed attention in PyTorch the
way one would write it without MagiAttention (the seed's approach): cut the query axis into the
segments the range list's query ranges make, gather each segment's key ranges (sorted, joined) into
one K/V copy, then run torch's best attention on the gathered rows:

  sdpa          segments of equal (queries, keys) shape batched into one
                F.scaled_dot_product_attention call each (enable_gqa; torch picks the backend),
  flash-varlen  flash_attn_varlen_func over all segments of a batch, when flash_attn imports.

Gathered K/V are bounded by --budget-gib per call (a group larger than that is split), so the
gather cost is timed with the attention: it is part of the approach.

Reads exactly the rows avdit ran: `avdit bench windowed-attention --dump-ranges FILE.json` (shapes
and scale in the file). Random q/k/v of the same shapes and dtype. FLOPs: 4 * pairs * D * Hq, pairs
the attended (query, key) pairs. Timing: CUDA events (wall clock on the CPU), median of --iters.

--check: on a small list (avdit's --small), the peer's output against a dense-mask float64
computation of the same rows; with --io DIR (avdit's --dump-io) on avdit's own inputs, and avdit's
output against the same dense reference.

Usage: windowed_attention_peer.py --ranges FILE.json [--device cuda|cpu] [--dtype bf16|fp16|fp32]
                                  [--iters 5] [--warmup 1] [--budget-gib 8] [--json FILE]
                                  [--check [--io DIR]]
"""
import argparse
import bisect
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def load_ranges(path):
    with open(path) as f:
        j = json.load(f)
    rows = j["ranges"]
    for r in rows:
        if not (0 <= r[0] <= r[1] <= j["q_rows"] and 0 <= r[2] <= r[3] <= j["k_rows"]):
            sys.exit(f"{path}: range row {r} outside [0, {j['q_rows']}) x [0, {j['k_rows']})")
    return j, rows


def plan(rows, q_rows):
    """Query segments (cut at every query-range boundary) with their key ranges sorted and joined;
    a (query, key) pair that two rows cover is refused, as avdit's op refuses it."""
    cuts = sorted({0, q_rows} | {r[0] for r in rows} | {r[1] for r in rows})
    keys = [[] for _ in range(len(cuts) - 1)]
    for qb, qe, kb, ke in rows:
        if qb == qe or kb == ke:
            continue
        for s in range(bisect.bisect_left(cuts, qb), bisect.bisect_left(cuts, qe)):
            keys[s].append((kb, ke))
    segments = []
    for s, ks in enumerate(keys):
        if not ks:
            continue
        ks.sort()
        joined = [list(ks[0])]
        for b, e in ks[1:]:
            if b < joined[-1][1]:
                sys.exit(f"queries [{cuts[s]}, {cuts[s + 1]}) see keys [{b}, {joined[-1][1]}) twice")
            if b == joined[-1][1]:
                joined[-1][1] = e
            else:
                joined.append([b, e])
        segments.append((cuts[s], cuts[s + 1], joined))
    return segments


def key_index(joined, device):
    """The gathered key rows of one segment: the concatenation of its ranges."""
    r = torch.tensor(joined, dtype=torch.int64)
    lens = r[:, 1] - r[:, 0]
    starts = torch.repeat_interleave(r[:, 0] - (torch.cumsum(lens, 0) - lens), lens)
    return (starts + torch.arange(int(lens.sum()))).to(device)


def batches(items, per_item_bytes, budget):
    """Consecutive runs of items whose gathered bytes stay under the budget (at least one each)."""
    out, cur, used = [], [], 0
    for it in items:
        b = per_item_bytes(it)
        if cur and used + b > budget:
            out.append(cur)
            cur, used = [], 0
        cur.append(it)
        used += b
    if cur:
        out.append(cur)
    return out


class Sdpa:
    """Segments grouped by (queries, keys) shape; one SDPA call per group batch."""

    def __init__(self, segments, hkv, d, esize, device, budget):
        groups = {}
        for qb, qe, joined in segments:
            n = sum(e - b for b, e in joined)
            groups.setdefault((qe - qb, n), []).append((qb, qe, joined))
        self.calls = []
        for (sq, n), segs in groups.items():
            for part in batches(segs, lambda s: 2 * n * hkv * d * esize, budget):
                qi = torch.stack([torch.arange(qb, qe) for qb, qe, _ in part]).to(device)  # [B, sq]
                ki = torch.stack([key_index(j, device) for _, _, j in part])  # [B, n]
                self.calls.append((qi, ki))

    def __call__(self, q, k, v, scale, out):
        for qi, ki in self.calls:
            qs = q[qi].transpose(1, 2)  # [B, Hq, sq, D]
            ks, vs = k[ki].transpose(1, 2), v[ki].transpose(1, 2)  # [B, Hkv, n, D]
            o = F.scaled_dot_product_attention(qs, ks, vs, scale=scale, enable_gqa=True)
            out[qi] = o.transpose(1, 2)
        return out


class FlashVarlen:
    """All segments of a budget batch in one flash_attn_varlen_func call."""

    def __init__(self, segments, hkv, d, esize, device, budget):
        from flash_attn import flash_attn_varlen_func  # noqa: F401 (checked by the caller)

        self.fn = flash_attn_varlen_func
        self.calls = []
        n_of = lambda s: sum(e - b for b, e in s[2])
        for part in batches(segments, lambda s: 2 * n_of(s) * hkv * d * esize, budget):
            qi = torch.cat([torch.arange(qb, qe) for qb, qe, _ in part]).to(device)
            ki = torch.cat([key_index(j, device) for _, _, j in part])
            lq = torch.tensor([0] + [qe - qb for qb, qe, _ in part])
            lk = torch.tensor([0] + [n_of(s) for s in part])
            cq = torch.cumsum(lq, 0).to(device=device, dtype=torch.int32)
            ck = torch.cumsum(lk, 0).to(device=device, dtype=torch.int32)
            self.calls.append((qi, ki, cq, ck, int(lq.max()), int(lk.max())))

    def __call__(self, q, k, v, scale, out):
        for qi, ki, cq, ck, mq, mk in self.calls:
            out[qi] = self.fn(q[qi], k[ki], v[ki], cq, ck, mq, mk, softmax_scale=scale, causal=False)
        return out


def run(impl, q, k, v, scale, out, device, warmup, iters):
    for _ in range(warmup):
        impl(q, k, v, scale, out)
    ms = []
    for _ in range(iters):
        if device == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            impl(q, k, v, scale, out)
            b.record()
            torch.cuda.synchronize()
            ms.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            impl(q, k, v, scale, out)
            ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def dense_reference(rows, q, k, v, scale):
    """float64 softmax over the mask the rows define, one head at a time; uncovered queries 0."""
    L, hq, d = q.shape
    mask = torch.zeros(L, k.shape[0], dtype=torch.bool)
    for qb, qe, kb, ke in rows:
        mask[qb:qe, kb:ke] = True
    q64, k64, v64 = q.double().cpu(), k.double().cpu(), v.double().cpu()
    out = torch.zeros(L, hq, d, dtype=torch.float64)
    g = hq // k.shape[1]
    covered = mask.any(1)
    for h in range(hq):
        s = (q64[:, h] @ k64[:, h // g].T) * scale
        s = s.masked_fill(~mask, float("-inf"))
        p = torch.softmax(s[covered], dim=-1)
        out[covered, h] = p @ v64[:, h // g]
    return out


def rel(a, ref):
    return float((a.double().cpu() - ref).abs().max() / ref.abs().max())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranges", required=True, help="JSON of avdit bench windowed-attention --dump-ranges")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dtype", default="bf16", choices=list(DTYPES))
    ap.add_argument("--backends", default="flash-varlen,sdpa")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--budget-gib", type=float, default=8.0, help="gathered K+V bytes per call")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--check", action="store_true", help="exactness against a dense-mask float64 computation")
    ap.add_argument("--io", help="with --check: avdit's --dump-io folder (its inputs and output)")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: torch sees no GPU (use --device cpu for the small layout)")

    meta, rows = load_ranges(a.ranges)
    L, hq, hkv, d, scale = meta["q_rows"], meta["hq"], meta["hkv"], meta["d"], meta["scale"]
    t0 = time.perf_counter()
    segments = plan(rows, L)
    pairs = sum((qe - qb) * sum(e - b for b, e in j) for qb, qe, j in segments)
    plan_s = time.perf_counter() - t0
    dt = DTYPES[a.dtype]
    esize = torch.tensor([], dtype=dt).element_size()
    budget = int(a.budget_gib * (1 << 30))

    impls = {}
    for name in a.backends.split(","):
        if name == "sdpa":
            impls[name] = lambda: Sdpa(segments, hkv, d, esize, a.device, budget)
        elif name == "flash-varlen":
            try:
                import flash_attn  # noqa: F401
            except ImportError:
                print("flash-varlen: flash_attn does not import here; skipped", file=sys.stderr)
                continue
            if a.device != "cuda":
                continue
            impls[name] = lambda: FlashVarlen(segments, hkv, d, esize, a.device, budget)
        else:
            sys.exit(f"--backends {name}: expected flash-varlen or sdpa")

    if a.check:
        # avdit's inputs when given (its bf16 values widened to float32), else our own draws.
        if a.io:
            io = json.load(open(f"{a.io}/meta.json"))
            assert (io["L"], io["hq"], io["hkv"], io["d"]) == (L, hq, hkv, d), (io, meta)
            load = lambda n, h: torch.from_numpy(
                __import__("numpy").fromfile(f"{a.io}/{n}.bin", dtype="float32").reshape(L, h, d).copy())
            q, k, v = load("q", hq), load("k", hkv), load("v", hkv)
        else:
            g = torch.Generator().manual_seed(7)
            q, k, v = (torch.randn(L, h, d, generator=g).to(dt).float() for h in (hq, hkv, hkv))
        ref = dense_reference(rows, q, k, v, scale)
        ok = True
        if a.io:
            e = rel(load("out", hq), ref)
            bar = 1e-5
            # The CPU op accumulates in float32 (bar 1e-5); the GPU kernel's fp32 online softmax
            # differs from it only in summation order, well inside the same bar.
            print(f"avdit ({io['device']}, {io['dtype']} inputs, float32 output) vs dense float64: {e:.2e} (bar {bar:g})")
            ok &= e <= bar
        for name, make in impls.items():
            for cdt in ([torch.float32] if a.device == "cpu" else [torch.float32, dt]):
                if name == "flash-varlen" and cdt == torch.float32:
                    continue  # flash takes bf16 / fp16 only
                out = torch.zeros(L, hq, d, dtype=cdt, device=a.device)
                qq, kk, vv = (x.to(device=a.device, dtype=cdt) for x in (q, k, v))
                impl = make()
                impl(qq, kk, vv, scale, out)
                e = rel(out, ref)
                bar = 1e-5 if cdt == torch.float32 else 2e-2
                print(f"peer {name} ({str(cdt).replace('torch.', '')}) vs dense float64: {e:.2e} (bar {bar:g})")
                ok &= e <= bar
        print("check: " + ("ok" if ok else "FAILED"))
        if not ok:
            sys.exit(1)

    dev = a.device
    g = torch.Generator(device=dev).manual_seed(1)
    q = torch.randn(L, hq, d, generator=g, device=dev, dtype=torch.float32).to(dt)
    k = torch.randn(L, hkv, d, generator=g, device=dev, dtype=torch.float32).to(dt)
    v = torch.randn(L, hkv, d, generator=g, device=dev, dtype=torch.float32).to(dt)
    out = torch.zeros(L, hq, d, device=dev, dtype=dt)
    flop = 4.0 * pairs * d * hq
    res = []
    name_dev = torch.cuda.get_device_name() if dev == "cuda" else "CPU"
    print(f"{name_dev}, torch {torch.__version__}; {L} tokens, {len(rows)} range pairs, "
          f"{len(segments)} segments, {pairs} attended pairs (plan {plan_s:.1f} s, untimed); "
          f"median of {a.iters} after {a.warmup} warm-up; FLOPs 4 * pairs * D * Hq")
    print("\n| backend | calls | ms | spread ms | TFLOP/s | peak GiB |\n|---|---|---|---|---|---|")
    for name, make in impls.items():
        impl = make()
        if dev == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        ms = run(impl, q, k, v, scale, out, dev, a.warmup, a.iters)
        peak = torch.cuda.max_memory_allocated() if dev == "cuda" else 0
        med = statistics.median(ms)
        tf = flop / (med * 1e-3) / 1e12
        r = {"backend": name, "calls": len(impl.calls), "ms": med, "spread_ms": max(ms) - min(ms),
             "tflops": tf, "peak_bytes": peak, "tokens": L, "range_pairs": len(rows),
             "segments": len(segments), "pairs": pairs, "dtype": a.dtype, "device": name_dev}
        res.append(r)
        print(f"| {name} | {len(impl.calls)} | {med:.2f} | {max(ms) - min(ms):.2f} | {tf:.3f} | {peak / 2**30:.2f} |")
        del impl
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
