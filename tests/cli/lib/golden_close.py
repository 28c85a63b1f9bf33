#!/usr/bin/env python3
"""golden_close.py GOT WANT BAR NAME...: each NAME is a float32 tensor of both safetensors files,
GOT holds exactly the NAMEs, the shapes agree and max |got - want| <= BAR * max |want| (the bar the
goldens' READMEs state). Standard library only. Exit 1 with the failing tensor named."""
import json
import struct
import sys


def read(path):  # float32 tensors of a safetensors file, by name
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__" or v["dtype"] != "F32":
            continue
        s, e = v["data_offsets"]
        out[k] = (v["shape"], struct.unpack(f"<{(e - s) // 4}f", b[8 + n + s:8 + n + e]))
    return out


got, want, bar, names = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
if sorted(got) != sorted(names):
    sys.exit(f"{sys.argv[1]} holds {sorted(got)}, expected {sorted(names)}")
for k in names:
    (shape, g), (wshape, w) = got[k], want[k]
    if shape != wshape:
        sys.exit(f"{k}: shape {shape}, golden {wshape}")
    err = max(abs(x - y) for x, y in zip(g, w)) / max(abs(y) for y in w)
    if not err <= bar:
        sys.exit(f"{k}: max |diff| {err:.3e} of max |ref|, bar {bar:g}")
