#!/usr/bin/env bash
# The step-cache table of bench/notes/step_cache.md on the tiny models (illustrative: random-weight
# goldens, 16 steps): per policy the skip pattern and fraction, the ideal speedup, the teacher-forced
# error per modality and the end-to-end final latent SNR (avdit score), and the indicator
# calibration's in-sample and leave-one-out R². Usage: bench/step_cache_table.sh AVDIT [SHARED]
set -euo pipefail
avdit=${1:?usage: step_cache_table.sh AVDIT [SHARED]} shared=${2:-/work/shared}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
steps=16
row() {  # row FAMILY MODEL TEXT SHAPE POLICY...
  local family=$1 model=$2 text=$3 shape=$4
  shift 4
  local common=(--model "$model" --text "$text" --latent-shape "$shape" --steps $steps)
  echo "\$ avdit calibrate step-cache ${common[*]} --out cal.json" >&2
  "$avdit" -q calibrate step-cache "${common[@]}" --out "$tmp/$family-cal.json" >/dev/null
  local cands=() p
  for p in "$@"; do
    p=${p//CAL/$tmp/$family-cal.json}
    "$avdit" -q generate "${common[@]}" --step-cache "$p" --json >"$tmp/$family-$(echo "$p" | md5sum | cut -c1-8).json"
    cands+=(--candidate "$(echo "$p" | md5sum | cut -c1-8)=--step-cache $p")
  done
  echo "\$ avdit score teacher ${common[*]} --teacher-dir T --candidate NAME='--step-cache POLICY' ..." >&2
  "$avdit" -q score teacher "${common[@]}" --teacher-dir "$tmp/t-$family" "${cands[@]}" --out "$tmp/st-$family" \
    --json >"$tmp/$family-teacher.json"
  echo "\$ avdit score e2e ${common[*]} --candidate NAME='--step-cache POLICY' ..." >&2
  "$avdit" -q score e2e "${common[@]}" "${cands[@]}" --out "$tmp/se-$family" --json >"$tmp/$family-e2e.json"
  python3 - "$tmp" "$family" "$@" <<'PY'
import hashlib, json, sys
tmp, family, policies = sys.argv[1], sys.argv[2], sys.argv[3:]
cal = json.load(open(f"{tmp}/{family}-cal.json"))
teacher = {c["name"]: c for c in json.load(open(f"{tmp}/{family}-teacher.json"))["candidates"]}
e2e = {c["name"]: c for c in json.load(open(f"{tmp}/{family}-e2e.json"))["candidates"]}
print(f"\n**{family}** (tiny, {cal['steps']} steps). Calibration (`avdit calibrate step-cache`): "
      f"modulated input (TeaCache) Pearson r {cal['modulated']['pearson_r']:.3f}, in-sample R² "
      f"{cal['modulated']['r2']:.3f}, leave-one-out R² {cal['modulated']['loo_r2']:.3f}; first block r "
      f"{cal['first_block']['pearson_r']:.3f}, R² {cal['first_block']['r2']:.3f}, LOO R² "
      f"{cal['first_block']['loo_r2']:.3f}; the reused residual changes by at least "
      f"{cal['min_residual_change']:.3f} between calls.\n")
print("| policy | pattern | skipped | speedup (ideal) | teacher-forced error video | audio | e2e final latent SNR dB video | audio |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
def num(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else str(v)
for p in policies:
    real = p.replace("CAL", f"{tmp}/{family}-cal.json")
    name = hashlib.md5(real.encode() + b"\n").hexdigest()[:8]
    g = json.load(open(f"{tmp}/{family}-{name}.json")).get("step_cache")
    t, e = teacher[name], e2e[name]
    pattern = g["pattern"] if g else "C" * cal["steps"]
    skipped = g["skipped"] if g else 0
    speed = g["ideal_speedup"] if g else 1.0
    label = p.replace("CAL", "cal.json")
    print(f"| `{label}` | `{pattern}` | {skipped}/{len(pattern)} | {speed:.2f}x | {num(t['video']['error'], '.3g')} | "
          f"{num(t['audio']['error'], '.3g')} | {num(e['final_snr_db']['video'], '.1f')} | "
          f"{num(e['final_snr_db']['audio'], '.1f')} |")
PY
}
M2=$shared/golden/magi2-tiny H3=$shared/golden/h3-tiny
row magi2 "$M2" "$M2/sampler.safetensors" 2,4,6,10 none uniform:2:4 uniform:3:4 uniform:2:8 indicator:0.25 \
  indicator:0.5 indicator:1.5:CAL first-block:0.45
row h3 "$H3" "$H3/inputs.safetensors" 2,4,6,9 none uniform:2:4 uniform:3:4 uniform:2:8 indicator:0.03 \
  indicator:0.06 indicator:0.04:CAL first-block:0.03
