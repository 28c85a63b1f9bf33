#!/usr/bin/env bash
# One call on the GPU machine: build, every `gpu` test, then each benchmark next to its PyTorch
# peer (same call, same card: TARGETS.md protocol). Run from the repo root there, carrying .carry
# (scripts/device_pack.sh):   bench/run_device.sh [tests] [moe] [h3] [attention] [profile]
# (default: the first four, in this order; profile: Nsight Compute on the fused experts kernel)
# Logs and JSON go to $OUT (at most 8 files come back: build and ctest logs, generate.md (both tiny
# models on the GPU), one markdown log per benchmark, and json.tar with every JSON report).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-/tmp/avdit-device}
mkdir -p "$out" "$out/json"
stages=${*:-tests moe h3 attention}
has() { [[ " $stages " == *" $1 "* ]]; }

tests=$(ls tests/gpu/*_test.cpp | xargs -n1 basename | sed 's/\.cpp$//' | tr '\n' ' ')
ctest_args=(-N)
has tests && ctest_args=(-L gpu --timeout 120 -V)  # -V: the figures passing tests print
BUILD_TARGETS="${BUILD_TARGETS:-avdit $tests}" scripts/device_build.sh build-dev "${ctest_args[@]}" >/dev/null 2>&1
echo "build + tests: exit $?"
cat "$out/configure.log" >>"$out/build.log" 2>/dev/null && rm -f "$out/configure.log"
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  |Timeout" "$out/ctest.log" 2>/dev/null | head -40

# The same library path device_build.sh used (fmt, OpenBLAS come from .devdeps there).
L=$PWD/.devdeps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$L:$L/openblas-pthread:${LD_LIBRARY_PATH:-}
A=build-dev/avdit
[ -d shared/golden ] && export AVDIT_SHARED_DIR=$PWD/shared  # what device_build.sh configured with
export PYTHONUNBUFFERED=1

# Both tiny models end to end on the GPU: step time, launches, weight / activation bytes, and the
# output SHA-256 of two runs (determinism).
if has tests; then
  {
    m=shared/golden/magi2-tiny h=shared/golden/h3-tiny
    for p in fp32 bf16; do
      for run in 1 2; do
        timeout 60 $A generate --model $m --text $m/sampler.safetensors --negative $m/sampler.safetensors \
          --noise $m/sampler.safetensors --steps 4 --device cuda --precision $p
        timeout 60 $A generate --model $h --text $h/inputs.safetensors --noise $h/sampler.safetensors --steps 4 \
          --device cuda --precision $p
      done
    done
    timeout 60 $A generate --model $m --text $m/sampler.safetensors --negative $m/sampler.safetensors \
      --noise $m/sampler.safetensors --steps 4 --device cuda --precision bf16 --nvfp4-experts
    # The step time without CUPTI's host cost (the busy shares above are against probed steps).
    echo "### bf16 step times without the CUPTI probe, 8 steps"
    AVDIT_LAUNCH_COUNTS=0 timeout 60 $A generate --model $m --text $m/sampler.safetensors \
      --negative $m/sampler.safetensors --noise $m/sampler.safetensors --steps 8 --device cuda --precision bf16
    AVDIT_LAUNCH_COUNTS=0 timeout 60 $A generate --model $h --text $h/inputs.safetensors \
      --noise $h/sampler.safetensors --steps 8 --device cuda --precision bf16
  } >"$out/generate.md" 2>&1
fi

if has moe; then
  {
    timeout 120 $A bench moe --dump-check /tmp/moe_check.safetensors &&
      timeout 120 python3 bench/peers/moe_peer.py --check /tmp/moe_check.safetensors
    timeout 150 $A bench moe --tokens 16384,65536,131072 --nvfp4 --json "$out/json/avdit_moe.json"
    timeout 100 python3 bench/peers/moe_peer.py --tokens 16384,65536,131072 --json "$out/json/peer_moe.json"
  } >"$out/moe.md" 2>&1
fi
# Nsight Compute on the first expert-kernel launch of one T = 65,536 MoE call (the fused experts kernel; the
# two-GEMM fallback: PROFILE_REGEX="device_kernel"): tensor-pipe use, stall reasons, memory throughput
# (profile.md), and every SASS instruction with its executions and stall samples by reason
# (profile_sass.csv.xz: the source page, to find which wait the warps stall on).
if has profile; then
  {
    NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
    echo "ncu: ${NCU:-not found}"
    if [ -n "$NCU" ]; then
      timeout 300 "$NCU" --kernel-name "regex:${PROFILE_REGEX:-fused_kernel}" --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
        --section SourceCounters --export /tmp/avdit_profile --force-overwrite \
        $A bench moe --tokens 65536 --iters 1 --warmup 0
      "$NCU" --import /tmp/avdit_profile.ncu-rep --page details
      "$NCU" --import /tmp/avdit_profile.ncu-rep --page source --csv --print-source sass |
        xz -6 >"$out/profile_sass.csv.xz"
    fi
  } >"$out/profile.md" 2>&1
fi
if has h3; then
  {
    timeout 60 $A bench h3 --check /tmp/h3_check &&
      timeout 60 python3 bench/peers/h3_peer.py --check /tmp/h3_check --golden shared/golden/h3-tiny
    timeout 150 $A bench h3 --rows 19456,40128 --iters 2 --warmup 1 --json "$out/json/avdit_h3.json"
    timeout 120 python3 bench/peers/h3_peer.py --rows 19456,40128 --iters 2 --warmup 1 --json "$out/json/peer_h3.json"
  } >"$out/h3.md" 2>&1
fi
if has attention; then
  {
    args=(--len 16384,65536 --dtype bf16 --shapes preview,h3,refiner --iters 5 --warmup 1)
    timeout 150 python3 bench/peers/attention_peer.py "${args[@]}" --json "$out/json/peer_attention.json"
    timeout 150 $A bench attention "${args[@]}" --peer "$out/json/peer_attention.json" \
      --json "$out/json/avdit_attention.json"
  } >"$out/attention.md" 2>&1
fi
tar -cf "$out/json.tar" -C "$out" json && rm -rf "$out/json"
tail -n 25 "$out"/*.md 2>/dev/null
