#!/usr/bin/env bash
# On the GPU machine (Ubuntu 24.04 image with CUDA 13, no Debian -dev packages, no network):
# configures and builds avdit against the carried .devdeps/ (see scripts/device_deps.sh), then
# runs the `gpu` tests. Usage, from the repo root there:
#   scripts/device_build.sh [BUILD_DIR] [ctest args...]     (default build-device, -L gpu)
# With BUILD_TARGETS set (space-separated), only those targets are built; CMAKE_ARGS adds configure
# arguments (e.g. -DAVDIT_OBSERVER=OFF).
# Logs go to $OUT when it is set (the device tool's output folder).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build-device}
shift || true
# The packed dependencies of scripts/device_pack.sh (carried as .carry): .devdeps, third_party and
# the goldens, unpacked once per machine; shared/ then stands in for ../shared.
if [ -f .carry/deps.tar.xz ] && [ ! -d .devdeps ]; then
  tar -xJf .carry/deps.tar.xz
  export AVDIT_SHARED_DIR=${AVDIT_SHARED_DIR:-$PWD/shared}
fi
[ -d shared/golden ] && export AVDIT_SHARED_DIR=${AVDIT_SHARED_DIR:-$PWD/shared}
P=$PWD/.devdeps/root/usr
L=$P/lib/x86_64-linux-gnu
[ -d "$P" ] || { echo "no .devdeps: run scripts/device_deps.sh here and carry .devdeps" >&2; exit 2; }
export LD_LIBRARY_PATH=$L:$L/openblas-pthread:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
gen=$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")
log=${OUT:-/tmp}
cmake -S . -B "$build" -G "$gen" -DAVDIT_CUDA=ON -DCMAKE_PREFIX_PATH="$P" \
  -DBLAS_LIBRARIES="$L/openblas-pthread/libopenblas.so" \
  -DCBLAS_INCLUDE_DIR="$P/include/x86_64-linux-gnu/openblas-pthread" \
  -DAVDIT_CUDA_PORTABLE_ARCHS=90a -DAVDIT_SHARED_DIR="${AVDIT_SHARED_DIR:-$PWD/../shared}" ${CMAKE_ARGS:-} \
  >"$log/configure.log" 2>&1 ||
  { tail -30 "$log/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS} >"$log/build.log" 2>&1 || { grep -E "error|Error" -A3 "$log/build.log" | head -40; exit 1; }
[ $# -gt 0 ] || set -- -L gpu
ctest --test-dir "$build" --output-on-failure "$@" 2>&1 | tee "$log/ctest.log"
