#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/*_fuzz.cpp) with clang-14, ASan and UBSan, and runs each
# for SECONDS on its committed seeds (tests/fuzz/corpus/<target>/) plus what earlier runs found
# (build-fuzz/corpus/<target>/, not committed).
#   tests/fuzz/run.sh [SECONDS] [TARGET...]     (default 60 s, every target; 0 builds only)
# Exits non-zero when a target finds a crash, a leak, UB, a timeout (-timeout=10 s per input) or an
# out-of-memory (-rss_limit_mb); the input lands in build-fuzz/crashes/<target>/ and becomes a unit
# test case. Environment: FUZZ_BUILD_DIR (default build-fuzz), JOBS (build jobs, default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
secs=${1:-60}
shift || true
build=${FUZZ_BUILD_DIR:-build-fuzz}
targets=("$@")
if [ ${#targets[@]} = 0 ]; then
  for f in tests/fuzz/*_fuzz.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
# A folder already configured for fuzzing (.ci/run's sanitised build, with the tests on) is kept as
# it is; otherwise the library and targets alone, with .ci/run's flags.
if ! grep -qs '^AVDIT_FUZZ:BOOL=ON$' "$build/CMakeCache.txt"; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DAVDIT_FUZZ=ON -DAVDIT_SANITIZE=ON \
    -DAVDIT_CUDA=OFF -DAVDIT_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" >/dev/null
fi
cmake --build "$build" --target "${targets[@]}" -j "${JOBS:-2}"
if [ "$secs" = 0 ]; then exit 0; fi  # build only (libFuzzer reads 0 as "no time limit")
rc=0
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  echo "[fuzz] $t: $secs s"
  # detect_leaks: the FIFO and folder refusals must not leak their descriptors' buffers either.
  t_rc=0
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/tests/fuzz/$t" "$build/corpus/$t" "tests/fuzz/corpus/$t" -dict=tests/fuzz/json.dict \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
    -artifact_prefix="$build/crashes/$t/" -print_final_stats=1 2>"$build/$t.log" || t_rc=$?
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|stat::new_units_added)' "$build/$t.log" \
    | tr '\n' ' ' || true
  echo
  if [ $t_rc != 0 ]; then
    rc=1
    echo "[fuzz] $t FAILED (exit $t_rc); the input is in $build/crashes/$t/:"
    grep -v -E '^#[0-9]+|^INFO:' "$build/$t.log" | tail -n 40
  fi
done
exit $rc
