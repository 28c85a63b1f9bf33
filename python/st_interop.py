#!/usr/bin/env python3
"""safetensors interop between avdit (C++) and the Python `safetensors` package.

Usage (run with the repo venv, .venv/bin/python):
  st_interop.py write OUT.safetensors    write the recipe below with safetensors + ml_dtypes
  st_interop.py check IN.safetensors     read a file (written by avdit) with safetensors and
                                         compare every tensor bit-exactly with the recipe
  st_interop.py dtypes-table OUT.bin     decode tables from ml_dtypes, for exhaustive dtype tests

Recipe (v1). i is the flat (row-major) element index, 0 <= i < 256; values are stored
little-endian; "bits" means the raw storage bits.
  name   dtype     shape        element i
  f64    F64       [16, 16]     i < 8: SPECIAL[F64][i] (bits); else (i - 128) / 4
  f32    F32       [16, 16]     i < 8: SPECIAL[F32][i] (bits); else (i - 128) / 4
  f16    F16       [16, 16]     i < 8: SPECIAL[F16][i] (bits); else (i - 128) / 4
  bf16   BF16      [16, 16]     i < 8: SPECIAL[BF16][i] (bits); else (i - 128) / 4
  f8e4m3 F8_E4M3   [16, 16]     bits = i (every pattern: +-0, subnormals 0x01-0x07, NaN 0x7F/0xFF)
  u8     U8        [16, 16]     i
  i8     I8        [16, 16]     i - 128
  i16    I16       [16, 16]     i < 255: (i - 128) * 2^8;  i == 255: 2^15 - 1
  i32    I32       [16, 16]     i < 255: (i - 128) * 2^24; i == 255: 2^31 - 1
  i64    I64       [16, 16]     i < 255: (i - 128) * 2^56; i == 255: 2^63 - 1
  bool   BOOL      [4, 4, 16]   i % 3 == 0 (stored as byte 0 or 1)
  scalar F32       []           one element: 1.5
  empty  I64       [0, 3]       no elements
(i - 128) / 4 is exact in every float type above. SPECIAL[d] is, in order:
  +0, -0, +inf, -inf, quiet NaN (sign 0, top mantissa bit only), smallest positive subnormal,
  negative largest subnormal, largest finite:
  F16:  0000 8000 7C00 FC00 7E00 0001 83FF 7BFF
  BF16: 0000 8000 7F80 FF80 7FC0 0001 807F 7F7F
  F32:  00000000 80000000 7F800000 FF800000 7FC00000 00000001 807FFFFF 7F7FFFFF
  F64:  0 8000000000000000 7FF0000000000000 FFF0000000000000 7FF8000000000000
        1 800FFFFFFFFFFFFF 7FEFFFFFFFFFFFFF
A file must hold exactly these tensors (any order); metadata is not checked.

dtypes-table: little-endian float32, no header, 131344 values:
  [0, 65536)        f16 bit pattern b -> float32      [65536, 131072) bf16 pattern b -> float32
  [131072, 131328)  e4m3fn byte b -> float32          [131328, 131344) e2m1fn nibble b -> float32
NaN payloads are not specified: compare NaN-ness for NaNs and bits (so -0 != +0) for the rest.
"""
import sys

import ml_dtypes
import numpy as np
from safetensors import deserialize
from safetensors.numpy import save_file

N = 256
SPECIAL = {
    "F16": [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x83FF, 0x7BFF],
    "BF16": [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x807F, 0x7F7F],
    "F32": [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
            0x807FFFFF, 0x7F7FFFFF],
    "F64": [0, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000,
            0x7FF8000000000000, 1, 0x800FFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF],
}
FLOATS = {"F64": (np.float64, np.uint64), "F32": (np.float32, np.uint32),
          "F16": (np.float16, np.uint16), "BF16": (ml_dtypes.bfloat16, np.uint16)}
NP_DTYPE = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
            "F8_E4M3": ml_dtypes.float8_e4m3fn, "U8": np.uint8, "I8": np.int8, "I16": np.int16,
            "I32": np.int32, "I64": np.int64, "BOOL": np.bool_}


def _float(st_dtype):
    ftype, utype = FLOATS[st_dtype]
    a = ((np.arange(N, dtype=np.float64) - 128) / 4).astype(ftype)
    bits = a.view(utype)
    bits[:8] = np.array(SPECIAL[st_dtype], dtype=utype)
    return bits.view(ftype).reshape(16, 16)


def _signed(dtype, width):
    i = np.arange(N, dtype=np.int64)
    a = (i - 128).astype(object) * (1 << (width - 8))  # object ints: no overflow
    a[255] = (1 << (width - 1)) - 1
    return np.array(a.tolist(), dtype=dtype).reshape(16, 16)


def recipe():
    """name -> (safetensors dtype, numpy array)"""
    t = {name.lower(): (name, _float(name)) for name in FLOATS}
    i = np.arange(N)
    t["f8e4m3"] = ("F8_E4M3", i.astype(np.uint8).view(ml_dtypes.float8_e4m3fn).reshape(16, 16))
    t["u8"] = ("U8", i.astype(np.uint8).reshape(16, 16))
    t["i8"] = ("I8", (i - 128).astype(np.int8).reshape(16, 16))
    t["i16"] = ("I16", _signed(np.int16, 16))
    t["i32"] = ("I32", _signed(np.int32, 32))
    t["i64"] = ("I64", _signed(np.int64, 64))
    t["bool"] = ("BOOL", (i % 3 == 0).reshape(4, 4, 16))
    t["scalar"] = ("F32", np.array(1.5, dtype=np.float32))
    t["empty"] = ("I64", np.zeros((0, 3), dtype=np.int64))
    return t


def write(path):
    save_file({k: v for k, (_, v) in recipe().items()}, path,
              metadata={"writer": "avdit python/st_interop.py", "recipe": "v1"})
    print(f"wrote {len(recipe())} tensors to {path}")


def check(path):
    with open(path, "rb") as f:
        got = {name: info for name, info in deserialize(f.read())}  # the package's own parser
    want = recipe()
    errors = [f"missing tensor {k}" for k in want if k not in got]
    errors += [f"unexpected tensor {k}" for k in got if k not in want]
    for k, (dt, arr) in want.items():
        if k not in got:
            continue
        g = got[k]
        if g["dtype"] != dt or list(g["shape"]) != list(arr.shape):
            errors.append(f"{k}: want {dt}{list(arr.shape)}, got {g['dtype']}{list(g['shape'])}")
            continue
        data = bytes(g["data"])
        if data != arr.tobytes():
            gv = np.frombuffer(data, dtype=NP_DTYPE[dt])
            wv = arr.reshape(-1)
            bad = next(j for j in range(wv.size) if gv[j:j+1].tobytes() != wv[j:j+1].tobytes())
            errors.append(f"{k}: element {bad}: want {wv[bad]!r}, got {gv[bad]!r}")
    for e in errors:
        print(f"{path}: {e}", file=sys.stderr)
    print(f"{path}: {len(want) - len(errors)} of {len(want)} tensors bit-exact")
    return 1 if errors else 0


def dtypes_table(path):
    u16 = np.arange(1 << 16, dtype=np.uint16)
    u8 = np.arange(256, dtype=np.uint8)
    parts = [u16.view(np.float16).astype(np.float32),
             u16.view(ml_dtypes.bfloat16).astype(np.float32),
             u8.view(ml_dtypes.float8_e4m3fn).astype(np.float32),
             u8[:16].view(ml_dtypes.float4_e2m1fn).astype(np.float32)]
    table = np.concatenate(parts).astype("<f4")
    table.tofile(path)
    print(f"wrote {table.size} float32 values to {path}")


def main(argv):
    cmds = {"write": write, "check": check, "dtypes-table": dtypes_table}
    if len(argv) != 3 or argv[1] not in cmds:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return cmds[argv[1]](argv[2]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
