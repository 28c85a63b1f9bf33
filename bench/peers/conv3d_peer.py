#!/usr/bin/env python3
"""Peer of `avdit bench conv3d`: torch.nn.functional.conv3d (cuDNN) in BF16 on channels_last_3d
tensors, the same shapes: x [1, Cin, T, H, W], weight [Cout, Cin, k, k, k], bias, causal time pad
k-1 (F.pad, as Wan2.2's CausalConv3d does) and space pad k/2, stride 1. CUDA events, --warmup then
the median of --iters runs (the pad's copy inside the timed region, as the reference pays it).

Usage: conv3d_peer.py [--shapes "T,H,W,Cin,Cout,k;..."] [--iters 5] [--json FILE]
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F

DEFAULT = "4,88,160,1024,1024,3;4,176,320,512,512,3;4,352,640,256,256,3;4,352,640,256,12,3"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default=DEFAULT)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--json")
    a = p.parse_args()
    torch.backends.cudnn.benchmark = True
    rows = []
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    for item in a.shapes.split(";"):
        T, H, W, cin, cout, k = (int(v) for v in item.split(","))
        x = torch.randn(1, cin, T, H, W, device="cuda", dtype=torch.bfloat16)
        x = x.contiguous(memory_format=torch.channels_last_3d)
        w = (torch.randn(cout, cin, k, k, k, device="cuda", dtype=torch.bfloat16) * 0.02)
        w = w.contiguous(memory_format=torch.channels_last_3d)
        b = torch.randn(cout, device="cuda", dtype=torch.bfloat16) * 0.02
        def run():
            xp = F.pad(x, (k // 2, k // 2, k // 2, k // 2, k - 1, 0))
            return F.conv3d(xp, w, b)
        ms = []
        with torch.inference_mode():
            for i in range(a.warmup + a.iters):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                run()
                e.record()
                e.synchronize()
                if i >= a.warmup:
                    ms.append(s.elapsed_time(e))
        med = statistics.median(ms)
        flop = 2.0 * T * H * W * cout * k * k * k * cin
        rows.append({"shape": f"{T}x{H}x{W} {cin}->{cout} k{k}", "ms": round(med, 3),
                     "TFLOP/s": round(flop / (med * 1e-3) / 1e12)})
        print(f"| {rows[-1]['shape']} | {flop / 1e9:.1f} | {med:.3f} | {rows[-1]['TFLOP/s']} |")
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
