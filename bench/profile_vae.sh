#!/usr/bin/env bash
# Where a VAE decode's GPU time goes, avdit beside its PyTorch peer (issue 32's ratio): each run
# under bench/kernprof (CUPTI; the lent H200 has no nsys), one decode each (no warm-up: cuDNN's plan
# building shows as host time, not kernels), then each one's kernels ranked by total GPU time.
# Run on the GPU machine from a build's source root; the wan22 and oobleck peers need diffusers
# (the carried wheels on PYTHONPATH).
#   A=build-dev/avdit OUT=/tmp/prof bash bench/profile_vae.sh turbo --precision bf16 --frames 241 --height 544 --width 960
#   A=build-dev/avdit bash bench/profile_vae.sh oobleck --seconds 10
# Arguments: the decoder (wan22 | turbo | oobleck: the three with a peer), then options both take.
set -euo pipefail
A=${A:?set A to the built avdit}
OUT=${OUT:-/tmp/profile-vae}
dec=${1:?decoder: wan22, turbo or oobleck}
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$OUT"
export KERNPROF_TOP=${TOP:-25}
"$here/kernprof/kernprof.sh" "$OUT/avdit.md" -- "$A" bench vae --decoder "$dec" --device cuda --warmup 0 "$@" \
  >"$OUT/avdit.log" 2>&1 || { echo "profile_vae.sh: avdit failed: $(tail -3 "$OUT/avdit.log")" >&2; exit 1; }
"$here/kernprof/kernprof.sh" "$OUT/peer.md" -- python3 "$here/peers/vae_peer.py" --decoder "$dec" --warmup 0 --iters 1 "$@" \
  >"$OUT/peer.log" 2>&1 || { echo "profile_vae.sh: the peer failed: $(tail -3 "$OUT/peer.log")" >&2; exit 1; }
for name in avdit peer; do
  echo "### $name"
  cat "$OUT/$name.md"
  echo
done
