#!/usr/bin/env python3
"""Compare two safetensors files tensor by tensor, by name.

  compare_tensors.py GOT.safetensors WANT.safetensors [--rtol 1e-4] [--names a,b,...] [--require-all]

For each name present in both (or each of --names), prints max |got - want| / max |want| and
fails (exit 1) when it exceeds --rtol; integer tensors must match exactly. With --require-all,
every tensor of GOT must exist in WANT. Runs under the repo's .venv.
"""
import argparse
import sys

import numpy as np
from safetensors.numpy import load_file


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("got")
    ap.add_argument("want")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--names", default="")
    ap.add_argument("--require-all", action="store_true")
    a = ap.parse_args()
    got, want = load_file(a.got), load_file(a.want)
    names = [n for n in a.names.split(",") if n] or sorted(set(got) & set(want))
    bad = 0
    if a.require_all:
        for n in sorted(set(got) - set(want)):
            print(f"{n}: not in {a.want}")
            bad += 1
    if not names:
        print("no tensor names in common")
        return 1
    for n in names:
        if n not in got or n not in want:
            print(f"{n}: missing from {'GOT' if n not in got else 'WANT'}")
            bad += 1
            continue
        g, w = got[n], want[n]
        if g.shape != w.shape:
            print(f"{n}: shape {g.shape} != {w.shape}")
            bad += 1
            continue
        if np.issubdtype(w.dtype, np.integer):
            ok = np.array_equal(g.astype(np.int64), w.astype(np.int64))
            print(f"{n}: {'identical' if ok else 'DIFFERENT'} integers")
            bad += not ok
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        den = np.abs(w64).max() if w64.size else 0.0
        err = np.abs(g64 - w64).max() / den if den > 0 else np.abs(g64 - w64).max(initial=0.0)
        ok = bool(err <= a.rtol) and np.isfinite(g64).all()
        print(f"{n}: {err:.3e} of max {'ok' if ok else 'FAIL'}")
        bad += not ok
    print(f"{len(names) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
