#!/usr/bin/env bash
# One device call that checks a commit on the GPU machine: builds avdit and every gpu test from
# .carry/head.tar.gz (`git archive --format=tar.gz -o .carry/head.tar.gz HEAD`, so work in progress
# in the tree never reaches the build), runs the gpu tests, then both tiny pipelines prompt -> mp4
# on the GPU and, with BENCH=1, the H3 forward benchmark at RESULTS.md's sizes (peak activations).
# EXTRA (a bash command line, run last from the source root with $A the built command) adds
# benchmarks to the same call. PIPELINES=0 skips the tiny pipelines.
# Logs to $OUT: build.log, tests.md, pipelines.md, bench.md, extra.md.
set -uo pipefail
here=$PWD
out=${OUT:-/tmp/avdit-check}
mkdir -p "$out" /tmp/src
t0=$SECONDS
tar -xzf .carry/head.tar.gz -C /tmp/src
mkdir -p /tmp/src/.carry && ln -sf "$here/.carry/deps.tar.xz" /tmp/src/.carry/deps.tar.xz
cd /tmp/src
tests=$(ls tests/gpu/*_test.cpp | xargs -n1 basename | sed 's/\.cpp$//' | tr '\n' ' ')
OUT=$out BUILD_TARGETS="avdit $tests" scripts/device_build.sh build-dev -N >/dev/null 2>&1
echo "build: exit $? ($((SECONDS - t0)) s)"
grep -E "error" -A3 "$out/build.log" | head -30
export AVDIT_SHARED_DIR=$PWD/shared LD_LIBRARY_PATH=$PWD/.devdeps/root/usr/lib/x86_64-linux-gnu:$PWD/.devdeps/root/usr/lib/x86_64-linux-gnu/openblas-pthread
timeout ${TESTS_S:-300} ctest --test-dir build-dev -L gpu ${TESTS_REGEX:+-R "$TESTS_REGEX"} --timeout 200 --output-on-failure -j1 >"$out/tests.md" 2>&1
echo "gpu tests: exit $? ($((SECONDS - t0)) s)"
grep -E "tests passed|tests failed|Failed|Timeout|Not Run|\*\*\*" "$out/tests.md" | head -30
export A=$PWD/build-dev/avdit
P="A red fox runs through fresh snow at dawn."
# relerr GOT WANT: max |got - want| / max |want| of each float32 tensor of both files.
relerr() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
def read(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: struct.unpack(f"<{(v['data_offsets'][1] - v['data_offsets'][0]) // 4}f",
                             b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__" and v["dtype"] == "F32"}
g, w = read(sys.argv[1]), read(sys.argv[2])
for k in sorted(w):
    ref = max(abs(x) for x in w[k]) or 1.0
    print(f"  {k}: max |gpu - cpu| / max |cpu| = {max(abs(a - b) for a, b in zip(g[k], w[k])) / ref:.3e}")
PY
}
[ "${PIPELINES:-1}" = 1 ] && {
  $A -q init --pipeline h3 --out /tmp/h3 && $A -q init --pipeline magi2 --out /tmp/m2
  H3=(--model /tmp/h3 --prompt "$P" --frames 39 --height 64 --width 96 --steps 8 --seed 46 --no-cache)
  M2=(--model /tmp/m2 --prompt "$P" --seconds 2 --height 64 --width 96 --steps 8 --seed 46 --no-cache)
  echo "## h3 cpu fp32"; $A -q generate "${H3[@]}" --out /tmp/h3-cpu.safetensors
  for prec in fp32 bf16; do
    echo "## h3 cuda $prec"
    $A -q generate "${H3[@]}" --device cuda --precision $prec --out /tmp/h3-$prec.safetensors
    relerr /tmp/h3-$prec.safetensors /tmp/h3-cpu.safetensors
  done
  echo "## magi2 cpu fp32"; $A -q generate "${M2[@]}" --out /tmp/m2-cpu.safetensors
  for prec in fp32 bf16; do
    echo "## magi2 cuda $prec"
    $A -q generate "${M2[@]}" --device cuda --precision $prec --out /tmp/m2-$prec.safetensors
    relerr /tmp/m2-$prec.safetensors /tmp/m2-cpu.safetensors
  done
  echo "## h3 cuda fp32 again (bit-identical rerun?)"
  $A -q generate "${H3[@]}" --device cuda --out /tmp/h3-fp32b.safetensors
  cmp /tmp/h3-fp32.safetensors /tmp/h3-fp32b.safetensors && echo "  identical bytes"
  echo "## h3 cuda bf16 without the adaLN table (bit-identical to the table's run?)"
  $A -q generate "${H3[@]}" --device cuda --precision bf16 --no-adaln-table --out /tmp/h3-bf16-nt.safetensors
  cmp /tmp/h3-bf16.safetensors /tmp/h3-bf16-nt.safetensors && echo "  identical bytes"
} >"$out/pipelines.md" 2>&1
echo "pipelines: ($((SECONDS - t0)) s)"
if [ "${BENCH:-0}" = 1 ]; then
  $A bench h3 --rows 19456,40128 --no-canvas >"$out/bench.md" 2>&1
  echo "bench: exit $? ($((SECONDS - t0)) s)"
fi
if [ -n "${EXTRA:-}" ]; then
  bash -c "$EXTRA" >"$out/extra.md" 2>&1
  echo "extra: exit $? ($((SECONDS - t0)) s)"
fi
