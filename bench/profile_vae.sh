#!/usr/bin/env bash
# Where a VAE decode's GPU time goes, avdit beside its PyTorch peer (issue 32's ratio): nsys runs
# `avdit bench vae` and `bench/peers/vae_peer.py` on the same clip, then prints each one's kernels
# by total GPU time (the top TOP, and the share of the whole). Run on the GPU machine from a build's
# source root; the peer needs diffusers (the carried wheels on PYTHONPATH).
#   A=build-dev/avdit OUT=/tmp/prof bash bench/profile_vae.sh wan22 --precision bf16 --frames 81 --height 512 --width 896
#   A=build-dev/avdit bash bench/profile_vae.sh oobleck --seconds 10
# Arguments: the decoder (wan22 | oobleck: the two with a library peer), then options both take.
set -euo pipefail
A=${A:?set A to the built avdit}
OUT=${OUT:-/tmp/profile-vae}
TOP=${TOP:-12}
dec=${1:?decoder: wan22 or oobleck}
shift
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys 2>/dev/null || true)
[ -n "$NSYS" ] || { echo "profile_vae.sh: no nsys on this machine (CUDA toolkit's bin/)" >&2; exit 2; }
mkdir -p "$OUT"
profile() {  # NAME CMD...: one nsys run, its kernel summary as CSV
  local name=$1
  shift
  "$NSYS" profile -o "$OUT/$name" -f true --trace=cuda --stats=false "$@" >"$OUT/$name.log" 2>&1 ||
    { echo "profile_vae.sh: $name failed: $(tail -3 "$OUT/$name.log")" >&2; exit 1; }
  "$NSYS" stats -q -r cuda_gpu_kern_sum -f csv -o "$OUT/$name" "$OUT/$name.nsys-rep" >/dev/null
}
profile avdit "$A" bench vae --decoder "$dec" --device cuda "$@"
profile peer python3 bench/peers/vae_peer.py --decoder "$dec" "$@"
python3 - "$OUT" "$TOP" <<'PY'
import csv, glob, sys
out, top = sys.argv[1], int(sys.argv[2])
for name in ("avdit", "peer"):
    rows = list(csv.DictReader(open(glob.glob(f"{out}/{name}_cuda_gpu_kern_sum.csv")[0])))
    total = sum(float(r["Total Time (ns)"]) for r in rows)
    print(f"### {name}: {total / 1e9:.3f} s of kernels over all runs, {len(rows)} kernels")
    print("| share | total ms | calls | kernel |\n|---|---|---|---|")
    for r in sorted(rows, key=lambda r: -float(r["Total Time (ns)"]))[:top]:
        t = float(r["Total Time (ns)"])
        print(f"| {100 * t / total:.1f}% | {t / 1e6:.1f} | {r['Instances']} | {r['Name'][:90]} |")
PY
