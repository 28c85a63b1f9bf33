#!/usr/bin/env bash
# --device and --precision on forward and generate: an unknown device is a usage error (exit 2);
# --device cuda either runs (a GPU machine: then it must match the CPU within the fp32 parity bound,
# checked by the gpu tests) or fails with a message that names CUDA (a build without the backend:
# exit 2; a CUDA build on a machine without a GPU: exit 1) and writes nothing; bf16 generate on the
# CPU is refused with the command that emulates it.
# Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$@"
g=$shared/golden/h3-tiny

"$avdit" forward --model "$g" --inputs "$g/inputs.safetensors" --out "$tmp/a.st" --device gpu 2>"$tmp/err"
[ $? -eq 2 ] || fail "--device gpu: expected exit 2"
grep -q "expected cpu or cuda" "$tmp/err" || fail "--device gpu: message was: $(cat "$tmp/err")"

"$avdit" generate --model "$g" --text "$g/inputs.safetensors" --steps 1 --precision bf16 2>"$tmp/err"
[ $? -eq 2 ] || fail "--precision bf16 on the CPU: expected exit 2"
grep -q "device cuda" "$tmp/err" || fail "bf16 on cpu: message was: $(cat "$tmp/err")"

"$avdit" forward --model "$g" --inputs "$g/inputs.safetensors" --out "$tmp/c.st" --device cuda 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ]; then
  [ $rc -eq 1 ] || [ $rc -eq 2 ] || fail "--device cuda: exit $rc"
  grep -qi "cuda" "$tmp/err" || fail "--device cuda failed without naming CUDA: $(cat "$tmp/err")"
  [ ! -e "$tmp/c.st" ] || fail "--device cuda failed but wrote its output"
else
  [ -s "$tmp/c.st" ] || fail "--device cuda succeeded but wrote nothing"
fi
echo "device options: ok (cuda exit $rc)"
