#!/usr/bin/env bash
# The CPU oracle's bits do not depend on the thread count (issue 30): `avdit generate` at the
# issue's shapes (H3 latent 9,16,16,120; MAGI-2 4,16,16,80; tiny golden models, 2 steps) gives the
# same SHA-256 with 1, 2 and 4 threads, set through AVDIT_THREADS or OPENBLAS_NUM_THREADS. Before
# the fixed GEMM partition (ops/cpu/gemm_fixed.h) the 1- and 2-thread SHA-256s differed.
# Usage: determinism_cli.sh AVDIT_BINARY SHARED_DIR SOURCE_DIR
set -u
. "$(dirname "$0")/lib/prelude.sh"
H3=$shared/golden/h3-tiny
M2=$shared/golden/magi2-tiny
failed=0
shas() {  # shas VAR=VALUE FAMILY: the two SHA-256 lines of one run
  local env=$1 family=$2
  if [ "$family" = h3 ]; then
    set -- --model "$H3" --text "$H3/inputs.safetensors" --latent-shape 9,16,16,120
  else
    set -- --model "$M2" --text "$M2/sampler.safetensors" --negative "$M2/sampler.safetensors" --latent-shape 4,16,16,80
  fi
  env -u AVDIT_THREADS -u OPENBLAS_NUM_THREADS "$env" "$avdit" -q generate "$@" --steps 2 --seed 3 \
    | awk '/sha256/ {print $1, $NF}'
}
for family in h3 magi2; do
  ref=$(shas AVDIT_THREADS=1 "$family")
  [ "$(echo "$ref" | wc -l)" = 2 ] || { echo "FAIL $family: no SHA-256 printed"; failed=1; continue; }
  echo "$family, 1 thread:"; echo "$ref" | sed 's/^/  /'
  for env in AVDIT_THREADS=2 AVDIT_THREADS=4 OPENBLAS_NUM_THREADS=2 OPENBLAS_NUM_THREADS=4; do
    got=$(shas "$env" "$family")
    if [ "$got" = "$ref" ]; then
      echo "ok   $family $env"
    else
      echo "FAIL $family $env: SHA-256 differs from 1 thread"; echo "$got" | sed 's/^/  | /'; failed=1
    fi
  done
done
exit $failed
