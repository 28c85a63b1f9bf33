#!/usr/bin/env bash
# The fp16 range monitor on the tiny H3 golden: forward --range-report prints "covered 21 of 21
# sites" and a margin, writes the JSON (checked with Python) and the PNG beside it; generate with a
# step cache that skips a call covers less and states no margin; bad input exits 2 with one line
# (a MAGI-2 model, a .png report path, the report on --out's path).
# Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$@"
H3=$shared/golden/h3-tiny
M2=$shared/golden/magi2-tiny
bad() {  # bad NAME EXPECTED_TEXT CMD...: exit 2, one line on stderr holding EXPECTED_TEXT
  local name=$1 want=$2 rc=0
  shift 2
  "$@" >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
  [ "$rc" = 2 ] || fail "$name: exit $rc, expected 2: $(cat "$tmp/bad.err")"
  [ "$(wc -l <"$tmp/bad.err")" = 1 ] || fail "$name: more than one line: $(cat "$tmp/bad.err")"
  grep -qF -- "$want" "$tmp/bad.err" || fail "$name: '$want' not in: $(cat "$tmp/bad.err")"
  echo "ok   $name"
}

"$avdit" forward --model "$H3" --inputs "$H3/inputs.safetensors" --out "$tmp/out.safetensors" \
  --range-report "$tmp/r.json" 2>"$tmp/f.err" || fail "forward --range-report: $(cat "$tmp/f.err")"
grep -q "^range monitor: covered 21 of 21 sites (3 blocks x 7 sites x 1 call)" "$tmp/f.err" ||
  fail "coverage line: $(cat "$tmp/f.err")"
grep -q "^margin to fp16's 65504: " "$tmp/f.err" || fail "margin line: $(cat "$tmp/f.err")"
"$py" -c "
import json,sys; j=json.load(open(sys.argv[1]))
assert j['covered']==j['expected']==21 and j['margin']>1 and j['nonfinite']==0, j
assert [s['site'] for s in j['sites']]==['qkv','attn_core','attn_out','mlp_up','mlp_act','mlp_out','residual']
assert all(s['seen']==3 and len(s['max_abs_by_block'])==3 for s in j['sites'])
assert abs(j['margin']-65504/j['max_abs'])<1e-9*j['margin']" "$tmp/r.json" || fail "JSON: $(head -c 600 "$tmp/r.json")"
if grep -q "and $tmp/r.png" "$tmp/f.err"; then
  [ -s "$tmp/r.png" ] || fail "the PNG was announced but not written"
fi
echo "ok   forward --range-report"

# Latent mode with a step cache: the skipped call's 21 sites are not seen, no margin is stated.
"$avdit" generate --model "$H3" --text "$H3/inputs.safetensors" --noise "$H3/sampler.safetensors" --steps 4 \
  --step-cache uniform:2:1 --range-report "$tmp/g.json" --out "$tmp/g.safetensors" >"$tmp/g.out" 2>"$tmp/g.err" ||
  fail "generate --range-report: $(cat "$tmp/g.err")"
grep -q "^range monitor: covered 63 of 84 sites" "$tmp/g.err" || fail "partial coverage: $(cat "$tmp/g.err")"
grep -q "^margin not stated: 21 sites not seen" "$tmp/g.err" || fail "margin refused: $(cat "$tmp/g.err")"
grep -q "margin to fp16" "$tmp/g.err" && fail "a margin over unseen sites: $(cat "$tmp/g.err")"
"$py" -c "
import json,sys; j=json.load(open(sys.argv[1]))
assert j['covered']==63 and j['expected']==84 and j['margin'] is None, j['covered']
assert j['margin_refused']=='21 sites not seen' and j['first_not_seen']['block']==0" "$tmp/g.json" ||
  fail "partial JSON"
echo "ok   generate --range-report with a step cache"

bad "MAGI-2 refused" "--range-report watches MiniMax-H3" \
  "$avdit" generate --model "$M2" --text "$M2/sampler.safetensors" --latent-shape 2,4,6,10 --steps 2 \
  --range-report "$tmp/m.json"
bad "a .png path refused" "give the JSON file" \
  "$avdit" forward --model "$H3" --inputs "$H3/inputs.safetensors" --out "$tmp/o.safetensors" \
  --range-report "$tmp/r.png"
bad "the report on --out refused" "--range-report" \
  "$avdit" forward --model "$H3" --inputs "$H3/inputs.safetensors" --out "$tmp/same.json" \
  --range-report "$tmp/same.json"
