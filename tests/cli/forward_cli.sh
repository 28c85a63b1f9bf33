#!/usr/bin/env bash
# `avdit forward` end to end on both golden fixtures: the files it writes are compared with the
# goldens by tensor name (python/compare_tensors.py, 1e-4 of max), and bad input exits 2 with
# nothing written. Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
avdit=$1 shared=$2 src=$3
py=$src/.venv/bin/python
[ -x "$py" ] || { echo "FAIL: $py missing: run scripts/setup.sh"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

g=$shared/golden/magi2-tiny
"$avdit" forward --model "$g" --inputs "$g/inputs.safetensors" --out "$tmp/m.safetensors" --dump
"$py" "$src/python/compare_tensors.py" "$tmp/m.safetensors" "$g/outputs.safetensors" --rtol 1e-4 \
  --names video_velocity,audio_velocity,model_output,layers.2.router.topk_indices,layers.3.router.topk_indices,layers.5.output \
  || fail "magi2 forward differs from the golden"

g=$shared/golden/h3-tiny
"$avdit" forward --model "$g" --inputs "$g/inputs.safetensors" --out "$tmp/h.safetensors"
"$py" "$src/python/compare_tensors.py" "$tmp/h.safetensors" "$g/outputs.safetensors" --rtol 1e-4 \
  --names video_out,audio_out || fail "h3 T2VA forward differs from the golden"
"$avdit" forward --model "$g" --inputs "$g/inputs_fl2va.safetensors" --out "$tmp/f.safetensors"
"$py" "$src/python/compare_tensors.py" "$tmp/f.safetensors" "$g/outputs_fl2va.safetensors" --rtol 1e-4 \
  --names video_out,audio_out || fail "h3 FL2VA forward differs from the golden"

# Bad input: the wrong inputs file for the family -> exit 2, no output left behind.
set +e
"$avdit" forward --model "$shared/golden/magi2-tiny" --inputs "$g/inputs.safetensors" --out "$tmp/bad.safetensors" 2>"$tmp/err"
rc=$?
set -e
[ $rc -eq 2 ] || fail "wrong inputs gave exit $rc: $(cat "$tmp/err")"
[ ! -e "$tmp/bad.safetensors" ] || fail "a failed forward left an output file"
echo "1 passed, 0 failed"
