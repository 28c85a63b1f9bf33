#!/usr/bin/env bash
# A/B of this tree against an earlier commit on the GPU machine, in stages that fit the device tool's
# 10-minute calls (run from the repo root there, carrying .carry: deps.tar.xz from
# scripts/device_pack.sh and base.tar.gz = `git archive --format=tar.gz -o .carry/base.tar.gz COMMIT`):
#   bench/device_ab.sh build    this tree (avdit + gpu tests), the base tree (avdit) and this tree
#                               without the observer (-DAVDIT_OBSERVER=OFF, avdit), in parallel;
#                               with TESTS_WITHIN=SECONDS also the gpu tests once this tree is built
#   bench/device_ab.sh tests    every gpu test of this tree
#   bench/device_ab.sh tiny     both tiny models end to end on the GPU, this tree and the base; the
#                               observer's cost: step times with and without it compiled in
#   bench/device_ab.sh ab       bench moe, h3 and attention at RESULTS.md's sizes, each run by every
#                               binary of AB_ORDER (default base new base new) before the next
# Logs go to $OUT (ab.md, tiny.md, tests.md, build.md and json.tar).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-/tmp/avdit-device}
mkdir -p "$out/json"
P=$PWD/.devdeps/root/usr
L=$P/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$L:$L/openblas-pthread:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
NEW=build-dev/avdit BASE=build-base/src/build-dev/avdit NOOBS_BIN=build-noobs/avdit

build() {
  local t0=$SECONDS
  [ -d .devdeps ] || tar -xJf .carry/deps.tar.xz
  export AVDIT_SHARED_DIR=$PWD/shared
  local tests=${GPU_TESTS:-}  # GPU_TESTS: the gpu test targets to build (default all)
  [ -n "$tests" ] || tests=$(ls tests/gpu/*_test.cpp | xargs -n1 basename | sed 's/\.cpp$//' | tr '\n' ' ')
  OUT=/tmp/new BUILD_TARGETS="avdit $tests" scripts/device_build.sh build-dev -N >/dev/null 2>&1 &
  local new=$!
  mkdir -p build-base/src /tmp/base /tmp/noobs /tmp/new
  tar -xzf .carry/base.tar.gz -C build-base/src
  ln -sfn "$PWD/.devdeps" build-base/src/.devdeps
  ln -sfn "$PWD/third_party" build-base/src/third_party
  # The base's portable kernels for sm_90a alone, as this tree's device build (compile time only).
  sed -i 's/-gencode=arch=compute_75,code=sm_75;//' build-base/src/CMakeLists.txt
  (cd build-base/src && OUT=/tmp/base BUILD_TARGETS=avdit scripts/device_build.sh build-dev -N) >/dev/null 2>&1 &
  local base=$!
  local noobs=""  # NOOBS=0: without the no-observer build
  if [ "${NOOBS:-1}" != 0 ]; then
    OUT=/tmp/noobs BUILD_TARGETS=avdit CMAKE_ARGS=-DAVDIT_OBSERVER=OFF scripts/device_build.sh build-noobs -N \
      >/dev/null 2>&1 &
    noobs=$!
  fi
  wait $new; echo "new build: exit $? ($((SECONDS - t0)) s)"
  grep -E "error|Error" -A3 /tmp/new/build.log | head -20
  if [ -n "${TESTS_WITHIN:-}" ]; then  # the gpu tests beside the other builds, inside the call's time
    local left=$((TESTS_WITHIN - (SECONDS - t0)))
    echo "gpu tests (at most $left s):"
    timeout $left ctest --test-dir build-dev -L gpu --timeout 240 --output-on-failure -j1 >"$out/tests.md" 2>&1
    echo "ctest exit $?"
    grep -E "tests passed|tests failed|Failed|Timeout|Not Run" "$out/tests.md" | head -30
  fi
  wait $base; echo "base build: exit $? ($((SECONDS - t0)) s)"
  if [ -n "$noobs" ]; then wait $noobs; echo "no-observer build: exit $? ($((SECONDS - t0)) s)"; fi
  for b in new base noobs; do grep -sE "error|Error" -A3 /tmp/$b/build.log | head -20; done
  ls -la $NEW $BASE ${noobs:+$NOOBS_BIN}
}

tiny() {
  local m=shared/golden/magi2-tiny h=shared/golden/h3-tiny
  for bin in $NEW $BASE; do
    echo "### $bin"
    for p in fp32 bf16; do
      timeout 60 $bin generate --model $m --text $m/sampler.safetensors --negative $m/sampler.safetensors \
        --noise $m/sampler.safetensors --steps 4 --device cuda --precision $p
      timeout 60 $bin generate --model $h --text $h/inputs.safetensors --noise $h/sampler.safetensors --steps 4 \
        --device cuda --precision $p
    done
    timeout 60 $bin generate --model $m --text $m/sampler.safetensors --negative $m/sampler.safetensors \
      --noise $m/sampler.safetensors --steps 4 --device cuda --precision bf16 --nvfp4-experts
  done
  echo "### the observer's cost: bf16 step times without CUPTI, 16 steps, with (new) and without it compiled in"
  for r in 1 2; do
    for bin in $NEW $NOOBS_BIN; do
      echo "# $bin"
      AVDIT_LAUNCH_COUNTS=0 timeout 60 $bin generate --model $h --text $h/inputs.safetensors \
        --noise $h/sampler.safetensors --steps 16 --device cuda --precision bf16 | grep -E "step time|sha256"
      AVDIT_LAUNCH_COUNTS=0 timeout 60 $bin generate --model $m --text $m/sampler.safetensors \
        --negative $m/sampler.safetensors --noise $m/sampler.safetensors --steps 16 --device cuda \
        --precision bf16 | grep -E "step time|sha256"
    done
  done
  echo "### full width, 8 blocks at 19,456 rows, with and without the observer compiled in"
  for bin in $NEW $NOOBS_BIN $NEW $NOOBS_BIN; do
    timeout 120 $bin bench h3 --rows 19456 --no-canvas --blocks 8 --iters 5 --warmup 1 | grep -E "^\|"
  done
}

ab() {  # bench-major: each benchmark runs for every binary of AB_ORDER before the next one starts
  local order=${AB_ORDER:-$BASE $NEW $BASE $NEW}
  tag() { [ $1 = $NEW ] && echo new || echo base; }
  local i=0 bin
  for bin in $order; do
    i=$((i + 1)); echo "### moe $(tag $bin) ($bin), run $i"
    timeout 150 $bin bench moe --tokens 16384,65536,131072 $([ $bin = $BASE ] && echo "--path grouped") \
      --json "$out/json/moe_$(tag $bin)_$i.json" | grep -E "^\||routed|sub-layer|ROUTED|SUB-LAYER"
  done
  i=0
  for bin in $order; do
    i=$((i + 1)); echo "### h3 $(tag $bin) ($bin), run $i"
    timeout 200 $bin bench h3 --rows 19456,40128 --no-canvas --iters 2 --warmup 1 \
      $([ $bin = $BASE ] && echo "--attention cudnn") --json "$out/json/h3_$(tag $bin)_$i.json" | grep -E "^\|"
  done
  i=0
  for bin in $order; do
    i=$((i + 1)); echo "### attention $(tag $bin) ($bin), run $i"
    timeout 150 $bin bench attention --len 16384,65536 --dtype bf16 --shapes preview,h3,refiner --iters 5 \
      --warmup 1 --json "$out/json/attention_$(tag $bin)_$i.json" | grep -E "^\|"
  done
}

case "${1:-}" in
  build) build 2>&1 | tee "$out/build.md" ;;
  tests)  # TESTS: a ctest -R regex (default every gpu test)
    ctest --test-dir build-dev -L gpu ${TESTS:+-R "$TESTS"} --timeout 300 --output-on-failure -V -j1 2>&1 |
      tee "$out/tests.md" | grep -E "tests passed|tests failed|Failed|Timeout" ;;
  tiny) tiny >"$out/tiny.md" 2>&1; tail -n 60 "$out/tiny.md" ;;
  ab) ab >"$out/ab.md" 2>&1; tar -cf "$out/json.tar" -C "$out" json && rm -rf "$out/json"; tail -n 80 "$out/ab.md" ;;
  *) echo "usage: bench/device_ab.sh build|tests|tiny|ab" >&2; exit 2 ;;
esac
