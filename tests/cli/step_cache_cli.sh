#!/usr/bin/env bash
# Step caching on the tiny models: generate --step-cache prints the skip pattern the policy must give
# (latent mode on MAGI-2, pipeline mode on a tiny H3 pipeline; JSON too); calibrate step-cache's fit
# agrees with numpy (lib/step_cache_check.py) and its file drives indicator:THRESH:FILE; a score
# candidate with a policy runs; bad input exits 2 with one line naming it: a policy that does not
# parse (generate, score, a calibration file that is not one). The attention probe on the tiny H3:
# the coverage line, JSON and PNG; a bar outside (0, 1] and a MAGI-2 model exit 2.
# Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$@"
M2=$shared/golden/magi2-tiny
H3=$shared/golden/h3-tiny
bad() {  # bad NAME EXPECTED_TEXT CMD...: exit 2, one line on stderr holding EXPECTED_TEXT
  local name=$1 want=$2 rc=0
  shift 2
  "$@" >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
  [ "$rc" = 2 ] || fail "$name: exit $rc, expected 2: $(cat "$tmp/bad.err")"
  [ "$(wc -l <"$tmp/bad.err")" = 1 ] || fail "$name: more than one line: $(cat "$tmp/bad.err")"
  grep -qF -- "$want" "$tmp/bad.err" || fail "$name: '$want' not in: $(cat "$tmp/bad.err")"
  echo "ok   $name"
}
m2gen() { "$avdit" -q generate --model "$M2" --text "$M2/sampler.safetensors" --latent-shape 2,4,6,10 --steps 8 "$@"; }

# Latent mode, MAGI-2 (both CFG passes in one call): uniform:2:3 computes 3 opening steps, then
# every second step after them is skipped.
m2gen --step-cache uniform:2:3 >"$tmp/u.txt" || fail "generate --step-cache uniform:2:3"
grep -q "^step cache uniform:2:3: CCCCSCSC skipped 2 of 8 calls, speedup 1.33x" "$tmp/u.txt" ||
  fail "pattern line: $(cat "$tmp/u.txt")"
m2gen --step-cache uniform:3:2 --json >"$tmp/u.json" || fail "generate --step-cache --json"
"$py" -c "
import json,sys; s=json.load(open(sys.argv[1]))['step_cache']
assert s['pattern']=='CCCCSCCS' and s['skipped']==2 and s['calls']==8, s
assert abs(s['ideal_speedup']-8/6)<1e-12, s" "$tmp/u.json" || fail "JSON step_cache: $(cat "$tmp/u.json")"
# A run without the cache and one with none print no pattern and give the same latents.
a=$(m2gen | grep final_video) b=$(m2gen --step-cache none | grep final_video)
[ "$a" = "$b" ] || fail "--step-cache none changed the result"
m2gen --step-cache none | grep -q "step cache" && fail "none printed a pattern"
echo "ok   generate --step-cache (latent mode)"

# Calibration: numpy agrees with the fit; its file rescales the indicator.
"$avdit" -q calibrate step-cache --model "$M2" --text "$M2/sampler.safetensors" --latent-shape 2,4,6,10 --steps 12 \
  --out "$tmp/cal.json" >"$tmp/cal.txt" || fail "calibrate: $(cat "$tmp/cal.txt")"
grep -q "leave-one-out R²" "$tmp/cal.txt" || fail "calibrate table: $(cat "$tmp/cal.txt")"
"$py" "$src/tests/cli/lib/step_cache_check.py" "$tmp/cal.json" || fail "step_cache_check.py"
m2gen --step-cache "indicator:1e9:$tmp/cal.json" | grep -q "skipped 7 of 8 calls" || fail "indicator with a calibration"

# Pipeline mode on a tiny H3 pipeline (one call per step: the released weights are CFG-distilled).
"$avdit" -q init --pipeline h3 --size tiny --out "$tmp/h3p" >/dev/null || fail "init h3 pipeline"
"$avdit" -q generate --model "$tmp/h3p" --prompt "a cat" --steps 6 --latent-shape 3,4,6,8 \
  --out "$tmp/clip.safetensors" --step-cache uniform:2:2 >"$tmp/p.txt" || fail "pipeline --step-cache"
grep -q "^step cache uniform:2:2: CCCSCS skipped 2 of 6 calls, speedup 1.50x" "$tmp/p.txt" ||
  fail "pipeline pattern line: $(cat "$tmp/p.txt")"
echo "ok   generate --step-cache (pipeline mode)"

# A score candidate (teacher-forced): the policy's error is measured, not zero.
"$avdit" -q score teacher --model "$M2" --text "$M2/sampler.safetensors" --latent-shape 2,4,6,10 --steps 8 \
  --teacher-dir "$tmp/t" --candidate "u2=--step-cache uniform:2:3" --out "$tmp/s" --json >"$tmp/s.json" ||
  fail "score with a step-cache candidate"
"$py" -c "
import json,sys; j=json.load(open(sys.argv[1])); c={x['name']:x for x in j['candidates']}['u2']
e=c['video']['prompts'][0]['error_by_step']
assert all(x==0 for x in e[:4]) and all(x>0 for k,x in enumerate(e) if k in (4,6)), e" "$tmp/s.json" ||
  fail "score: the skipped steps' errors: $(cat "$tmp/s.json")"
echo "ok   score candidate --step-cache"

bad "policy that does not parse" "--step-cache 'uniform:1:3': EVERY '1'" m2gen --step-cache uniform:1:3
bad "unknown policy" "--step-cache 'sometimes': unknown policy" m2gen --step-cache sometimes
bad "pipeline mode policy" "--step-cache 'first-block:x'" "$avdit" generate --model "$tmp/h3p" --prompt x \
  --out "$tmp/x.mp4" --step-cache first-block:x
bad "score candidate policy" "--candidate u: --step-cache 'indicator:-1'" "$avdit" score teacher --model "$M2" \
  --text "$M2/sampler.safetensors" --teacher-dir "$tmp/t" --out "$tmp/s2" --candidate "u=--step-cache indicator:-1"
echo '{"modulated": {}}' >"$tmp/notcal.json"
bad "calibration file" "has no modulated.coefficients" m2gen --step-cache "indicator:0.1:$tmp/notcal.json"

# The attention sparsity probe (its numbers against brute force: tests/unit/attention_probe_test.cpp).
probe() { "$avdit" -q probe attention --model "$H3" --text "$H3/inputs.safetensors" --latent-shape 3,4,6,9 --steps 4 "$@"; }
probe --bar 0.7 --probe-steps 0,3 --out "$tmp/probe.json" --png "$tmp/probe.png" >"$tmp/probe.txt" ||
  fail "probe attention: $(cat "$tmp/probe.txt")"
grep -q "^covered 12 of 24 (step, block, head)" "$tmp/probe.txt" || fail "coverage line: $(cat "$tmp/probe.txt")"
[ "$(head -c 4 "$tmp/probe.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "probe.png is not a PNG"
"$py" -c "
import json,sys; j=json.load(open(sys.argv[1]))
assert j['covered']==12 and j['total']==24 and len(j['triples'])==12, j['covered']
assert {t['step'] for t in j['triples']}=={0,3}
assert all(t['pattern_mass_median']<=t['topk_mass_median']+1e-12 for t in j['triples'])  # top-k is the best k keys
assert j['heads_passing']==sum(h['pass'] for h in j['heads'])
assert all(h['pass']==(h['pattern_mass_median']>=0.7) for h in j['heads'])" "$tmp/probe.json" ||
  fail "probe JSON"
echo "ok   probe attention"
bad "probe bar above 1" "--bar 1.5: the pass mark" probe --bar 1.5
bad "probe bar 0" "--bar 0: the pass mark" probe --bar 0
bad "probe without a bar" "--bar is required" probe
bad "probe k" "--k -3" probe --bar 0.7 --k -3
bad "probe on MAGI-2" "the attention probe runs on H3" "$avdit" probe attention --model "$M2" \
  --text "$M2/sampler.safetensors" --latent-shape 2,4,6,10 --bar 0.7
echo "PASS step_cache_cli"
