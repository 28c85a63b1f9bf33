#!/usr/bin/env python3
"""ctest driver: safetensors interop both ways between Python `safetensors` and avdit.

  safetensors_roundtrip.py [--workdir DIR] -- CMD...

CMD is the C++ side (e.g. a test helper built by CMake); it must implement the recipe in
python/st_interop.py as two subcommands:  `CMD write OUT.safetensors` and `CMD check IN.safetensors`
(exit 0 when every tensor matches bit-exactly, non-zero otherwise).
Cases: Python writes -> C++ checks; C++ writes -> Python checks; C++ check rejects a Python file
with one flipped data bit. Runs itself under the repo's .venv (made by scripts/setup.sh).
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(ROOT, ".venv", "bin", "python")

if os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(ROOT, ".venv")):
    if not os.path.exists(VENV_PY):
        sys.exit(f"{VENV_PY} not found: run scripts/setup.sh first")
    os.execv(VENV_PY, [VENV_PY, os.path.abspath(__file__)] + sys.argv[1:])

sys.path.insert(0, os.path.join(ROOT, "python"))
import st_interop  # noqa: E402


def run(cmd):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode


def main(argv):
    workdir = None
    if argv[:1] == ["--workdir"]:
        workdir, argv = argv[1], argv[2:]
    if argv[:1] != ["--"] or len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    tool = argv[1:]
    tmp = tempfile.TemporaryDirectory(dir=workdir)
    py_file = os.path.join(tmp.name, "python.safetensors")
    cpp_file = os.path.join(tmp.name, "avdit.safetensors")
    bad_file = os.path.join(tmp.name, "flipped.safetensors")
    results = {}

    st_interop.write(py_file)
    results["python writes, avdit reads"] = run(tool + ["check", py_file]) == 0

    ok = run(tool + ["write", cpp_file]) == 0 and os.path.exists(cpp_file)
    results["avdit writes, python reads"] = ok and st_interop.check(cpp_file) == 0

    data = bytearray(open(py_file, "rb").read())
    data[-1] ^= 0x01  # last data byte: flips a bit of the last tensor in the file
    open(bad_file, "wb").write(data)
    results["avdit check rejects a flipped bit"] = run(tool + ["check", bad_file]) != 0

    for name, ok in results.items():
        print(f"{'PASS' if ok else 'FAIL'}: {name}")
    passed = sum(results.values())
    print(f"{passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
