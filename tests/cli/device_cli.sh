#!/usr/bin/env bash
# --device and --precision on forward and generate: an unknown device is a usage error (exit 2);
# --device cuda either runs (a GPU machine: then it must match the CPU within the fp32 parity bound,
# checked by the gpu tests) or fails with a message that names CUDA (a build without the backend:
# exit 2; a CUDA build on a machine without a GPU: exit 1) and writes nothing; bf16 and fp16 (H3's recipe) generate run on
# the CPU too (the same model code on bf16 / fp16 tensors) and differ from fp32; another precision, an
# unknown --fp16-fix or --fp16-fix without fp16 is refused.
# Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$@"
g=$shared/golden/h3-tiny

"$avdit" forward --model "$g" --inputs "$g/inputs.safetensors" --out "$tmp/a.st" --device gpu 2>"$tmp/err"
[ $? -eq 2 ] || fail "--device gpu: expected exit 2"
grep -q "expected cpu or cuda" "$tmp/err" || fail "--device gpu: message was: $(cat "$tmp/err")"

for p in fp32 bf16 fp16; do
  "$avdit" generate --model "$g" --text "$g/inputs.safetensors" --noise "$g/sampler.safetensors" --steps 2 \
    --precision $p >"$tmp/$p.out" 2>"$tmp/err" || fail "--precision $p on the CPU: exit $?: $(cat "$tmp/err")"
done
sha() { grep final_video "$1" | awk '{print $NF}'; }
[ -n "$(sha "$tmp/bf16.out")" ] && [ "$(sha "$tmp/bf16.out")" != "$(sha "$tmp/fp32.out")" ] ||
  fail "bf16 on the CPU gave fp32's SHA-256 (or none): the mode is not on"
# fp16 is H3's recipe, emulated on the CPU: a third result, and --fp16-fix none another.
[ -n "$(sha "$tmp/fp16.out")" ] && [ "$(sha "$tmp/fp16.out")" != "$(sha "$tmp/fp32.out")" ] &&
  [ "$(sha "$tmp/fp16.out")" != "$(sha "$tmp/bf16.out")" ] || fail "fp16 on the CPU gave fp32's or bf16's SHA-256"
"$avdit" generate --model "$g" --text "$g/inputs.safetensors" --noise "$g/sampler.safetensors" --steps 2 \
  --precision fp16 --fp16-fix residual,gating >"$tmp/fp16b.out" 2>"$tmp/err" || fail "--fp16-fix residual,gating: $(cat "$tmp/err")"
for bad in "--precision fp8" "--precision fp16 --fp16-fix residual,bogus" "--fp16-fix none"; do
  # shellcheck disable=SC2086
  "$avdit" generate --model "$g" --text "$g/inputs.safetensors" --noise "$g/sampler.safetensors" --steps 1 \
    $bad 2>"$tmp/err"
  [ $? -eq 2 ] || fail "$bad: expected exit 2"
  grep -qE "fp32|bogus|needs --precision fp16" "$tmp/err" || fail "$bad: message was: $(cat "$tmp/err")"
done

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
