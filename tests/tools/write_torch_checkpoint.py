#!/usr/bin/env python3
"""Writes PyTorch checkpoints the way torch.save does, without torch (standard library only), for
the tests of avdit's reader (src/io/torch_checkpoint.h).

torch.save writes a zip archive (stored, not compressed; each record's data 64-byte aligned by
padding the local header's extra field) holding PREFIX/data.pkl, PREFIX/byteorder, PREFIX/data/<key>
for every storage, PREFIX/version and PREFIX/.data/serialization_id. data.pkl is a protocol-2 pickle
of the object in which every tensor reduces to
    torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict())
and every storage is the persistent id ('storage', torch.<T>Storage, key, 'cpu', numel). This
script produces the same opcodes by pickling stand-ins registered under torch's module names (in
this process only), so Python's own pickler writes GLOBAL torch._utils _rebuild_tensor_v2 and
friends exactly as it does for torch. Limitation: no torch is installed here, so the files are a
faithful imitation, not torch's own output.

    write_torch_checkpoint.py OUT.pth IN.safetensors... [--wrap KEY] [--module-prefix]
                              [--decoy-state-dict] [--prefix NAME]
    write_torch_checkpoint.py --fixtures DIR      # the unit tests' fixtures (tests/fixtures/torch)

The first form writes the tensors of the safetensors files (merged) as a state dict; --wrap puts it
under KEY of a top-level dict (as MAGI-2's TurboVAED checkpoint: 'ema_state_dict'), with a few
non-tensor entries beside it; --module-prefix prefixes every name with 'module.' (a DDP model);
--decoy-state-dict adds a 'state_dict' entry whose tensors are zeros (the reader must choose
ema_state_dict). The output is deterministic (fixed zip timestamps).
"""
import collections
import json
import pickle
import struct
import sys
import types
import zipfile
import zlib

# --- stand-ins for torch's names -----------------------------------------------------------------

_torch = types.ModuleType("torch")
_utils = types.ModuleType("torch._utils")
_torch._utils = _utils
sys.modules.setdefault("torch", _torch)
sys.modules.setdefault("torch._utils", _utils)

DTYPES = {  # safetensors dtype -> (torch storage class name, element size, struct code)
    "F64": ("DoubleStorage", 8, "d"), "F32": ("FloatStorage", 4, "f"),
    "F16": ("HalfStorage", 2, "e"), "BF16": ("BFloat16Storage", 2, None),
    "I64": ("LongStorage", 8, "q"), "I32": ("IntStorage", 4, "i"), "I16": ("ShortStorage", 2, "h"),
    "I8": ("CharStorage", 1, "b"), "U8": ("ByteStorage", 1, "B"), "BOOL": ("BoolStorage", 1, "?"),
}


def _global(module, name, obj):
    obj.__module__ = module.__name__
    obj.__qualname__ = name
    obj.__name__ = name
    setattr(module, name, obj)
    return obj


for _name, _, _ in DTYPES.values():
    _global(_torch, _name, type(_name, (), {}))


def _rebuild_tensor_v2(*args):  # never called here: pickled by name only
    raise RuntimeError("stand-in")


_global(_utils, "_rebuild_tensor_v2", _rebuild_tensor_v2)


class Storage:
    """A storage: raw little-endian bytes of `numel` elements of `dtype` (a safetensors name)."""

    def __init__(self, key, dtype, data):
        self.key, self.dtype, self.data = key, dtype, data
        self.numel = len(data) // DTYPES[dtype][1]


class Tensor:
    """A view of a storage, reduced as torch reduces a tensor."""

    def __init__(self, storage, shape, offset=0, stride=None):
        self.storage, self.shape, self.offset = storage, tuple(shape), offset
        if stride is None:
            stride, s = [], 1
            for d in reversed(self.shape):
                stride.insert(0, s)
                s *= d
        self.stride = tuple(stride)

    def __reduce_ex__(self, protocol):
        return (_rebuild_tensor_v2,
                (self.storage, self.offset, self.shape, self.stride, False, collections.OrderedDict()))


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", getattr(_torch, DTYPES[obj.dtype][0]), obj.key, "cpu", obj.numel)
        return None


def state_dict(tensors):
    """An OrderedDict with torch's _metadata attribute, as Module.state_dict() returns."""
    sd = collections.OrderedDict(tensors)
    sd._metadata = collections.OrderedDict([("", {"version": 1})])
    return sd


# --- the archive ---------------------------------------------------------------------------------

def _storages(obj, found):
    """Every Storage reachable from obj, in first-seen order (keys must be unique)."""
    if isinstance(obj, Tensor):
        found.setdefault(obj.storage.key, obj.storage)
    elif isinstance(obj, dict):
        for v in obj.values():
            _storages(v, found)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _storages(v, found)
    return found


def write_zip64(path, records):
    """A stored, 64-byte aligned archive in ZIP64 form: every central directory entry's sizes and
    offset saturated (0xFFFFFFFF) with the 8-byte values in its ZIP64 extra field, and the
    end-of-central-directory record saturated, pointing through the ZIP64 locator at the ZIP64
    record (the layout of archives past 4 GiB)."""
    out, central = bytearray(), bytearray()
    for name, data in records:
        n = name.encode()
        crc = zlib.crc32(data)
        offset = len(out)
        pad = -(offset + 30 + len(n) + 4) % 64
        extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc, len(data), len(data),
                           len(n), len(extra)) + n + extra + data
        z64 = struct.pack("<HHQQQ", 0x0001, 24, len(data), len(data), offset)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, crc,
                               0xFFFFFFFF, 0xFFFFFFFF, len(n), len(z64), 0, 0, 0, 0,
                               0xFFFFFFFF) + n + z64
    cd_offset = len(out)
    out += central
    z64_offset = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(records), len(records),
                       len(central), cd_offset)
    out += struct.pack("<IIQI", 0x07064B50, 0, z64_offset, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(path, "wb") as f:
        f.write(out)


def write(path, obj, prefix="archive", align=True, pickle_bytes=None, compress=(), byteorder=b"little",
          zip64=False):
    """torch.save(obj, path) for an object of dicts, lists, numbers, strings and Tensors.
    pickle_bytes replaces data.pkl (hand-made pickles); compress names records to deflate; zip64
    writes the archive in ZIP64 form."""
    buf = __import__("io").BytesIO()
    _Pickler(buf, protocol=2).dump(obj)
    data_pkl = pickle_bytes if pickle_bytes is not None else buf.getvalue()
    records = [("data.pkl", data_pkl), ("byteorder", byteorder)]
    for key, s in sorted(_storages(obj, {}).items()):
        records.append((f"data/{key}", s.data))
    records += [("version", b"3\n"), (".data/serialization_id", b"0" * 40)]
    if zip64:
        write_zip64(path, [(f"{prefix}/{name}", data) for name, data in records])
        return
    with open(path, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
        for name, data in records:
            info = zipfile.ZipInfo(f"{prefix}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if name in compress else zipfile.ZIP_STORED
            info.create_system = 0
            if align:  # torch pads the local header's extra field so that the data starts at 64k
                start = f.tell() + 30 + len(info.filename.encode()) + 4
                pad = -start % 64
                info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
            z.writestr(info, data)


# --- safetensors in ------------------------------------------------------------------------------

def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    out = collections.OrderedDict()
    for name in sorted(k for k in header if k != "__metadata__"):
        e = header[name]
        s, t = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], b[8 + n + s:8 + n + t])
    return out


def tensors_from(files):
    merged = collections.OrderedDict()
    for path in files:
        for name, (dtype, shape, data) in read_safetensors(path).items():
            if name in merged:
                sys.exit(f"{path}: tensor {name} given twice")
            merged[name] = (dtype, shape, data)
    return merged


def convert(out, files, wrap=None, module_prefix=False, decoy=False, prefix="archive"):
    tensors = tensors_from(files)
    sd, zeros = [], []
    for i, (name, (dtype, shape, data)) in enumerate(tensors.items()):
        key = ("module." if module_prefix else "") + name
        sd.append((key, Tensor(Storage(str(i), dtype, data), shape)))
        zeros.append((key, Tensor(Storage(f"z{i}", dtype, bytes(len(data))), shape)))
    obj = state_dict(sd)
    if wrap:
        top = collections.OrderedDict()
        if decoy:
            top["state_dict"] = state_dict(zeros)
        top[wrap] = obj
        top["step"] = 12000
        top["lr"] = 1.5e-5
        top["note"] = "written by tests/tools/write_torch_checkpoint.py"
        top["shape"] = [3, (4, 5), None, True]
        obj = top
    write(out, obj, prefix=prefix)


# --- the unit tests' fixtures ----------------------------------------------------------------------

def f32(*values):
    return struct.pack(f"<{len(values)}f", *values)


def fixtures(d):
    import os
    os.makedirs(d, exist_ok=True)
    # tiny.pth: every dtype the reader maps, a 0-d and an empty tensor, two views of one storage
    # (offsets), a size-1 dimension with an odd stride, and a tensor whose storage is longer.
    shared = Storage("3", "F32", f32(*[float(10 + i) for i in range(10)]))
    bf16 = bytes([0x80, 0x3F, 0x00, 0x40, 0x40, 0x40, 0x80, 0xBF])  # 1, 2, 3, -1
    tiny = state_dict([
        ("a", Tensor(Storage("0", "F32", f32(0, 1, 2, 3, 4, 5)), [2, 3])),
        ("b", Tensor(Storage("1", "BF16", bf16), [4])),
        ("c", Tensor(Storage("2", "F16", struct.pack("<4e", 0.5, -2, 3, 4)), [2, 2])),
        ("view", Tensor(shared, [2, 2], offset=3)),
        ("view2", Tensor(shared, [3], offset=7)),
        ("column", Tensor(shared, [3, 1], offset=0, stride=[1, 7])),
        ("d", Tensor(Storage("4", "I64", struct.pack("<3q", -1, 2**40, 7)), [3])),
        ("scalar", Tensor(Storage("5", "F32", f32(42)), [])),
        ("empty", Tensor(Storage("6", "F32", b""), [0, 5])),
        ("u8", Tensor(Storage("7", "U8", bytes([1, 2, 255])), [3])),
    ])
    write(f"{d}/tiny.pth", tiny)
    write(f"{d}/tiny_unaligned.pt", tiny, prefix="tiny_unaligned", align=False)
    write(f"{d}/tiny_zip64.pth", tiny, zip64=True)
    # wrapped.ckpt: MAGI-2's TurboVAED layout (ema_state_dict chosen over state_dict, 'module.').
    ema = state_dict([("module.decoder.w", Tensor(Storage("0", "F32", f32(1, 2, 3, 4)), [2, 2])),
                      ("module.decoder.b", Tensor(Storage("1", "F32", f32(5, 6)), [2]))])
    decoy = state_dict([("module.decoder.w", Tensor(Storage("2", "F32", f32(0, 0, 0, 0)), [2, 2]))])
    top = collections.OrderedDict([("state_dict", decoy), ("ema_state_dict", ema), ("step", 12000),
                                   ("lr", 1.5e-5), ("big", 2**62), ("names", ["a", "b"])])
    write(f"{d}/wrapped.ckpt", top)
    # Refused: a tensor that is not contiguous (a transpose), one past its storage's end, an empty
    # one before its start, big-endian data, a deflated record, and the classic exploit (os.system
    # through REDUCE).
    st = Storage("0", "F32", f32(1, 2, 3, 4, 5, 6))
    write(f"{d}/transposed.pth", state_dict([("t", Tensor(st, [3, 2], stride=[1, 3]))]))
    write(f"{d}/past_end.pth", state_dict([("p", Tensor(st, [2, 3], offset=1))]))
    write(f"{d}/negative_offset.pth", state_dict([("e", Tensor(st, [0], offset=-1))]))
    write(f"{d}/big_endian.pth", tiny, byteorder=b"big")
    write(f"{d}/deflated.pth", tiny, compress=("data/0",))
    evil = b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."
    write(f"{d}/evil_global.pth", tiny, pickle_bytes=evil)
    # An opcode a weights-only checkpoint never holds (INST) in an otherwise valid archive.
    write(f"{d}/unknown_opcode.pth", tiny, pickle_bytes=b"\x80\x02(ios\nsystem\n.")
    # The legacy format (torch < 1.6): a raw pickle stream, no zip.
    with open(f"{d}/legacy.pt", "wb") as f:
        pickle.dump(0x1950A86A20F9469CFC6C, f, protocol=2)
        pickle.dump(1001, f, protocol=2)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("inputs", nargs="*")
    ap.add_argument("--fixtures")
    ap.add_argument("--wrap")
    ap.add_argument("--module-prefix", action="store_true")
    ap.add_argument("--decoy-state-dict", action="store_true")
    ap.add_argument("--prefix", default="archive")
    a = ap.parse_args()
    if a.fixtures:
        fixtures(a.fixtures)
    elif a.out and a.inputs:
        convert(a.out, a.inputs, a.wrap, a.module_prefix, a.decoy_state_dict, a.prefix)
    else:
        ap.error("give OUT.pth IN.safetensors... or --fixtures DIR")
