#!/usr/bin/env bash
# `avdit bench step` on the CPU with the tiny golden configs (--small): the same code as the GPU
# run (random weights, the pipeline's generate, the loop stopped after warm-up + timed + 1 observed
# step). Checks the markdown row, the JSON fields (the exact token counts of the packing, the stages
# the observed step split, a second H3 forward doubling the FLOPs), H3 with FP8 block GEMMs, random
# NVFP4 experts, and bad input exiting 2 with one line. No time is checked: times are the
# benchmark's output.
# Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$1" "$2"

step() { "$avdit" -q bench step --device cpu --small "$@"; }

step --family h3 --json "$tmp/h3.json" >"$tmp/h3.txt" || fail "h3: $(cat "$tmp/h3.txt")"
grep -q "^| h3 | latent 2,4,6,10 | cpu | bf16 | cond only (guidance 1, the release's) | 64 | 12 v + 20 a + 8 t |" \
  "$tmp/h3.txt" || fail "h3 row: $(cat "$tmp/h3.txt")"
grep -q "^h3 latent 2,4,6,10: .* 8 text + 20 audio + 12 video = 40 live rows, 64 packed" "$tmp/h3.txt" ||
  fail "h3 token line: $(cat "$tmp/h3.txt")"
step --family h3 --video-guidance 3 --iters 1 --warmup 0 --json "$tmp/h3cfg.json" >"$tmp/h3cfg.txt" ||
  fail "h3 cfg: $(cat "$tmp/h3cfg.txt")"
step --family h3 --precision fp8 --iters 1 --warmup 0 --json "$tmp/h3fp8.json" >"$tmp/h3fp8.txt" ||
  fail "h3 fp8: $(cat "$tmp/h3fp8.txt")"
step --family magi2 --json "$tmp/m2.json" >"$tmp/m2.txt" || fail "magi2: $(cat "$tmp/m2.txt")"
grep -q "per item 48 video + 10 audio + 8 text = 66 tokens; 2 items (cond, uncond) in one packed forward = 132 tokens" \
  "$tmp/m2.txt" || fail "magi2 token line: $(cat "$tmp/m2.txt")"
step --family magi2 --nvfp4-experts --json "$tmp/m2q.json" >"$tmp/m2q.txt" || fail "magi2 nvfp4: $(cat "$tmp/m2q.txt")"
echo "ok   runs"

python3 - "$tmp" <<'PY' || fail "JSON"
import json, sys
t = sys.argv[1]
def row(name):
    j = json.load(open(f"{t}/{name}.json"))
    assert len(j["rows"]) == 1, j
    return j["rows"][0]
common = ["family", "case", "device", "precision", "CFG", "tokens", "per pass", "schedule", "timed steps",
          "step s", "spread ms", "loop s", "attention s", "moe s", "gemm s", "rest s", "observed step s",
          "attention TFLOP", "gemm TFLOP", "moe TFLOP", "weights GB", "resident GB", "peak GB", "activations GB"]
h3, h3cfg, h3fp8, m2, m2q = row("h3"), row("h3cfg"), row("h3fp8"), row("m2"), row("m2q")
for r in (h3, h3cfg, h3fp8, m2, m2q):
    missing = [c for c in common if c not in r]
    assert not missing, missing
    assert r["device"] == "cpu" and r["step s"] > 0 and r["loop s"] > 0 and r["observed step s"] > 0, r
    assert r["attention s"] > 0 and r["gemm s"] > 0 and r["attention TFLOP"] > 0 and r["gemm TFLOP"] > 0, r
    assert abs(r["step s"] - (r["attention s"] + r["moe s"] + r["gemm s"] + r["rest s"])) < 1e-9, r
    assert r["peak GB"] >= r["activations GB"] >= 0, r
assert h3["family"] == "h3" and h3["tokens"] == 64 and h3["timed steps"] == 3 and h3["schedule"] == 49, h3
assert h3["moe s"] == 0 and h3["moe TFLOP"] == 0, h3
# FP8: the same step with the block GEMMs in e4m3 (the same FLOPs counted).
assert h3fp8["precision"] == "fp8 (row scales)" and h3fp8["gemm TFLOP"] == h3["gemm TFLOP"], h3fp8
# The uncond pass is a second forward of the same layout: twice the FLOPs.
assert h3cfg["CFG"].startswith("cond + uncond, two forwards"), h3cfg
assert abs(h3cfg["attention TFLOP"] - 2 * h3["attention TFLOP"]) < 1e-15, (h3cfg, h3)
assert abs(h3cfg["gemm TFLOP"] - 2 * h3["gemm TFLOP"]) < 1e-15, (h3cfg, h3)
# MAGI-2: the two items of one packed forward, 66 tokens each; the tiny config's 4-step schedule is
# lengthened to the 6 steps a run needs; the routed experts are timed.
assert m2["tokens"] == 132 and m2["per pass"] == "2 x (48 v + 10 a + 8 t)", m2
assert m2["CFG"].startswith("cond + uncond, one packed forward (video 5, audio 7)"), m2
assert m2["schedule"] == 6 and m2["moe s"] > 0 and m2["moe TFLOP"] > 0 and m2["moe sub-layer s"] > 0, m2
assert m2q["precision"] == "bf16 + nvfp4 experts" and m2q["moe s"] > 0, m2q
assert m2q["moe TFLOP"] == m2["moe TFLOP"], (m2q, m2)
PY
echo "ok   JSON"

bad() {  # bad NAME EXPECTED_TEXT ARGS...: exit 2, one line on stderr holding EXPECTED_TEXT
  local name=$1 want=$2 rc=0
  shift 2
  "$avdit" -q bench step "$@" >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
  [ "$rc" = 2 ] || fail "$name: exit $rc, expected 2: $(cat "$tmp/bad.err")"
  [ "$(wc -l <"$tmp/bad.err")" = 1 ] || fail "$name: more than one line: $(cat "$tmp/bad.err")"
  grep -qF -- "$want" "$tmp/bad.err" || fail "$name: '$want' not in: $(cat "$tmp/bad.err")"
  echo "ok   $name"
}
bad "unknown family" "--family: foo not in {magi2,h3}" --family foo --device cpu --small
bad "no family" "--family is required" --device cpu --small
bad "NVFP4 with H3" "--nvfp4-experts packs MAGI-2's routed experts" --family h3 --nvfp4-experts --device cpu --small
bad "fp8 scaling" "--fp8-scaling: block not in {row,tensor}" --family h3 --precision fp8 \
  --fp8-scaling block --device cpu --small
bad "fp16 with MAGI-2" "--precision fp16 is MiniMax-H3's recipe" --family magi2 --precision fp16 --device cpu --small
bad "full width on the CPU" "add --small" --family h3 --device cpu
bad "rows with MAGI-2" "--rows and --canvas are H3's cases" --family magi2 --rows 19456 --device cpu --small
bad "schedule too short" "need 6 steps of the schedule" --family h3 --steps 3 --device cpu --small
bad "size given twice" "both set the size" --family magi2 --latent-shape 2,4,6,10 --seconds 2 --device cpu --small
bad "attention plan on the CPU" "--attention-plan own: a plan of the GPU's attention" --family h3 \
  --attention-plan own --device cpu --small
bad "unknown attention plan" "--attention-plan: fast not in {default,split,ragged,own}" --family h3 \
  --attention-plan fast --device cpu --small
echo "bench step: ok"
