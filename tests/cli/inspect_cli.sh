#!/usr/bin/env bash
# `avdit inspect` on the golden checkpoints and the official configs, and its exit codes on bad
# input. Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$@"

out=$("$avdit" inspect "$shared/golden/magi2-tiny")
grep -q "detected: magi2-preview" <<<"$out" || fail "magi2-tiny family"
grep -q "every tensor the config implies is present" <<<"$out" || fail "magi2-tiny config vs checkpoint"
grep -q "181 tensors, 3.29 M parameters" <<<"$out" || fail "magi2-tiny counts"

out=$("$avdit" inspect "$shared/golden/h3-tiny")
grep -q "detected: h3" <<<"$out" || fail "h3-tiny family"
grep -q "every tensor the config implies is present" <<<"$out" || fail "h3-tiny config vs checkpoint"

out=$("$avdit" inspect --json "$shared/reference-configs/magi2/magi2_preview.json")
python3 - "$out" <<'PY' || fail "magi2 official config counts"
import json, sys
j = json.loads(sys.argv[1])
p = j["implied_by_config"]["params"]
assert j["family"] == "magi2-preview" and 113.5e9 < p < 114.5e9, p
PY

out=$("$avdit" inspect --json "$shared/reference-configs/h3/FL2VA/transformer/config.json")
python3 - "$out" <<'PY' || fail "h3 official config counts"
import json, sys
j = json.loads(sys.argv[1])
p = j["implied_by_config"]["params"]
assert j["family"] == "h3" and 33.0e9 < p < 33.2e9, p
assert j["implied_by_config"]["bytes"] == j["index_total_size"] == 66280430144, j["index_total_size"]
PY

# --zero-slices: the golden's adaLN weights are random draws, so no slice is zero (the unit test
# h3_adaln_slices_test zeroes some); the same as JSON.
out=$("$avdit" inspect --zero-slices "$shared/golden/h3-tiny")
grep -q "^0 zero slices of 56 " <<<"$out" || fail "h3-tiny zero slices: $out"
out=$("$avdit" inspect --zero-slices --json "$shared/golden/h3-tiny")
python3 - "$out" <<'PY' || fail "h3-tiny zero slices JSON"
import json, sys
j = json.loads(sys.argv[1])
assert j["slices"] == 56 and j["zero"] == 0 and j["zero_slices"] == [], j
PY

# Bad input: exit 2 and one line naming the file.
set +e
"$avdit" inspect --zero-slices "$shared/golden/magi2-tiny" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "--zero-slices on MAGI-2 gave exit $rc"
grep -q "magi2-tiny.*expected a MiniMax-H3 DiT checkpoint" "$tmp/err" || fail "message: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "error is not one line: $(cat "$tmp/err")"
"$avdit" inspect "$tmp/nope" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "missing path gave exit $rc"
head -c 100 "$shared/golden/h3-tiny/model.safetensors" >"$tmp/trunc.safetensors"
"$avdit" inspect "$tmp/trunc.safetensors" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "truncated file gave exit $rc"
grep -q "trunc.safetensors" "$tmp/err" || fail "message does not name the file: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "error is not one line: $(cat "$tmp/err")"
"$avdit" inspect --bogus-flag x 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "bad usage gave exit $rc"
set -e
echo "1 passed, 0 failed"
