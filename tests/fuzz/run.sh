#!/usr/bin/env bash
# Builds the safetensors header fuzzer with clang-14 (libFuzzer + ASan + UBSan) and runs it.
#   tests/fuzz/run.sh [SECONDS]   (default 600)
# Seeds: the golden fixtures' files' headers and a few hand-made ones. Crashes land in
# build-fuzz/crashes/; each one found becomes a case in tests/unit/safetensors_test.cpp.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
secs=${1:-600}
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DAVDIT_FUZZ=ON -DAVDIT_SANITIZE=ON \
  -DAVDIT_CUDA=OFF -DAVDIT_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz --target safetensors_header_fuzz -j2
mkdir -p build-fuzz/corpus build-fuzz/crashes
shared=${AVDIT_SHARED_DIR:-../shared}
for f in "$shared"/golden/*/*.safetensors; do
  # the header plus the first bytes of data keeps seeds small
  head -c 4096 "$f" > "build-fuzz/corpus/seed_$(basename "$(dirname "$f")")_$(basename "$f")"
done
printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' > build-fuzz/corpus/seed_empty
ASAN_OPTIONS=detect_leaks=1 ./build-fuzz/tests/fuzz/safetensors_header_fuzz build-fuzz/corpus \
  -max_total_time="$secs" -artifact_prefix=build-fuzz/crashes/ -max_len=65536 -print_final_stats=1
