#!/usr/bin/env bash
# One device call that checks a commit on the GPU machine: builds avdit and every gpu test from
# .carry/head.tar.gz (`git archive --format=tar.gz -o .carry/head.tar.gz HEAD`, so work in progress
# in the tree never reaches the build), runs the gpu tests, then both tiny pipelines prompt -> mp4
# on the GPU and, with BENCH=1, the H3 forward benchmark at RESULTS.md's sizes (peak activations).
# Logs to $OUT: build.log, tests.md, pipelines.md, bench.md.
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
timeout ${TESTS_S:-300} ctest --test-dir build-dev -L gpu --timeout 200 --output-on-failure -j1 >"$out/tests.md" 2>&1
echo "gpu tests: exit $? ($((SECONDS - t0)) s)"
grep -E "tests passed|tests failed|Failed|Timeout|Not Run|\*\*\*" "$out/tests.md" | head -30
A=build-dev/avdit
P="A red fox runs through fresh snow at dawn."
{
  $A -q init --pipeline h3 --out /tmp/h3 && $A -q init --pipeline magi2 --out /tmp/m2
  for prec in fp32 bf16; do
    echo "## h3 cuda $prec"
    $A generate --model /tmp/h3 --prompt "$P" --frames 39 --height 64 --width 96 --steps 8 --seed 46 \
      --device cuda --precision $prec --no-cache --out /tmp/h3-$prec.mp4 2>&1 | grep -v "^sample\|info:"
  done
  echo "## h3 cpu fp32"
  $A generate --model /tmp/h3 --prompt "$P" --frames 39 --height 64 --width 96 --steps 8 --seed 46 \
    --no-cache --out /tmp/h3-cpu.mp4 2>&1 | grep -v "^sample\|info:"
  echo "## magi2 cuda fp32"
  $A generate --model /tmp/m2 --prompt "$P" --seconds 2 --height 64 --width 96 --steps 8 --seed 46 \
    --device cuda --no-cache --out /tmp/m2.mp4 2>&1 | grep -v "^sample\|info:"
} >"$out/pipelines.md" 2>&1
echo "pipelines: ($((SECONDS - t0)) s)"
if [ "${BENCH:-0}" = 1 ]; then
  $A bench h3 --rows 19456,40128 --no-canvas >"$out/bench.md" 2>&1
  echo "bench: exit $? ($((SECONDS - t0)) s)"
fi
