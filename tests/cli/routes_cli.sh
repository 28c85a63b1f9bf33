#!/usr/bin/env bash
# Issue 34 end to end on the tiny MAGI-2 model: generate --route-stats (latent and pipeline mode)
# writes the same file bit for bit on a rerun, with route maps; avdit routes analyze prints the
# report (markdown; JSON with the issue's keys, recomputed here from the file with numpy; PNG
# plots); routes mask + generate --expert-mask never selects a masked expert (checked from the
# masked run's statistics); bad input - statistics of two configs merged, a mask of another model or
# of the wrong shape, --keep out of range, a bad --route-maps, a file that is not statistics -
# exits 2 with one line and writes nothing.
# Usage: routes_cli.sh AVDIT_BINARY SHARED_DIR SOURCE_DIR
set -u
. "$(dirname "$0")/lib/prelude.sh"
M2=$shared/golden/magi2-tiny
H3=$shared/golden/h3-tiny
W=$tmp/w  # refused commands write here; it must stay empty
mkdir -p "$W"
failed=0
bad() { echo "FAIL $*"; failed=1; }
av() { timeout 120 "$avdit" "$@"; }
# expect NAME RC MESSAGE CMD...: exit RC, stderr holds MESSAGE on one line, $W stays empty.
expect() {
  local name=$1 want=$2 msg=$3
  shift 3
  "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
  local rc=$?
  if [ "$rc" != "$want" ]; then
    bad "$name: exit $rc, expected $want"; sed 's/^/  | /' "$tmp/out.txt" "$tmp/err.txt" | head -20
  elif [ -n "$msg" ] && ! grep -qF -- "$msg" "$tmp/err.txt"; then
    bad "$name: stderr lacks '$msg'"; sed 's/^/  | /' "$tmp/err.txt"
  elif [ "$want" = 2 ] && [ "$(grep -c . "$tmp/err.txt")" != 1 ]; then
    bad "$name: expected one line on stderr"; sed 's/^/  | /' "$tmp/err.txt"
  else
    echo "ok   $name (exit $rc)"
  fi
  if [ -n "$(ls -A "$W")" ]; then bad "$name: wrote into the output folder: $(ls -A "$W")"; rm -rf "${W:?}"/*; fi
}
# The fixture's 4-step CFG run in latent mode.
gen_m2() {
  av -q generate --model "${MODEL:-$M2}" --text "$M2/sampler.safetensors" --negative "$M2/sampler.safetensors" \
    --noise "$M2/sampler.safetensors" "$@"
}

# ---- collection: determinism, maps -------------------------------------------------------------
expect stats-a 0 "" gen_m2 --out "$tmp/a.safetensors" --route-stats "$tmp/s1.safetensors" --route-maps 2:0:0,3:1:3
grep -q "^route statistics: 7344 selections" "$tmp/out.txt" || bad "summary line: $(cat "$tmp/out.txt")"
expect stats-b 0 "" gen_m2 --route-stats "$tmp/s2.safetensors" --route-maps 2:0:0,3:1:3
cmp -s "$tmp/s1.safetensors" "$tmp/s2.safetensors" || bad "two runs wrote different statistics"
# Collecting changes nothing in the run; --json names the file and its counts' SHA-256.
expect plain 0 "" gen_m2 --out "$tmp/plain.safetensors"
cmp -s "$tmp/a.safetensors" "$tmp/plain.safetensors" || bad "--route-stats changed the latents"
expect stats-json 0 "" gen_m2 --json --route-stats "$tmp/s3.safetensors"
"$py" -c "import json,sys; j=json.load(open('$tmp/out.txt')); sys.exit(0 if j['route_stats']['file'].endswith('s3.safetensors') and len(j['route_stats']['counts_sha256']) == 64 else 1)" \
  || bad "--json summary lacks route_stats"

# ---- analyze -----------------------------------------------------------------------------------
expect analyze-md 0 "" av routes analyze "$tmp/s1.safetensors"
grep -q "never-selected (layer, head, expert) pairs" "$tmp/out.txt" || bad "markdown report: $(head -5 "$tmp/out.txt")"
expect analyze-json 0 "" av routes analyze "$tmp/s1.safetensors" "$tmp/s2.safetensors" --json
"$py" - "$tmp/out.txt" "$tmp/s1.safetensors" <<'PY' || bad "analyze --json against numpy"
import json, math, sys
import numpy as np
from safetensors.numpy import load_file
j = json.load(open(sys.argv[1]))
s = load_file(sys.argv[2])
for k in ["dead_pairs", "effective_experts", "coverage_top128", "coverage_top192", "gap_cdf",
          "cond_uncond_cosine", "early_late_cosine"]:
    assert k in j, k
c = s["counts"].astype(np.int64) * 2  # two identical runs
L, H, M, P, B, E = c.shape
assert (L, H, M, P, B, E) == (2, 2, 3, 2, 10, 16)
# every layer: rows x heads x top_k selections
rows = s["rows"].sum()
assert rows == 153 * 4, rows
assert (c.sum(axis=(1, 2, 3, 4, 5)) == 2 * rows * H * 3).all()
tot = c.sum(axis=(2, 3, 4))  # [L, H, E]
dead = sorted([int(s["layers"][l]), h, e] for l, h, e in zip(*np.nonzero(tot == 0)))
assert j["dead_pairs"] == dead, (j["dead_pairs"], dead)
def eff(v):
    p = v[v > 0] / v.sum()
    return math.exp(-(p * np.log(p)).sum())
for l in range(L):
    for h in range(H):
        assert abs(j["effective_experts"]["all"][l][h] - eff(tot[l, h])) < 1e-9
        assert abs(j["effective_experts"]["audio"][l][h] - eff(c[l, h, 1].sum(axis=(0, 1)))) < 1e-9
cond, unc = c[:, :, :, 0].sum(axis=(2, 3)), c[:, :, :, 1].sum(axis=(2, 3))
cos = np.mean([cond[l, h] @ unc[l, h] / math.sqrt((cond[l, h] @ cond[l, h]) * (unc[l, h] @ unc[l, h]))
               for l in range(L) for h in range(H)])
assert abs(j["cond_uncond_cosine"] - cos) < 1e-9, (j["cond_uncond_cosine"], cos)
g = s["gap_hist"].sum(axis=(0, 1, 2, 3))
e = s["gap_edges"]
assert abs(e[30] - 1e-3) < 1e-9 and abs(e[40] - 1e-2) < 1e-8
assert abs(j["gap_cdf"]["1e-3"] - g[:31].sum() / g.sum()) < 1e-12
assert abs(j["gap_cdf"]["1e-2"] - g[:41].sum() / g.sum()) < 1e-12
assert j["coverage_top128"] == 1.0  # 16 experts
# route maps: every row's experts are a top-3 of distinct experts
for name in ["map.2.0.0", "map.3.1.3"]:
    m = s[name]
    assert m.shape == (153, 3) and all(len(set(r)) == 3 for r in m.tolist()), name
assert list(s["video_grid"]) == [2, 4, 6]
PY
if [ -n "$(av routes analyze "$tmp/s1.safetensors" --plots "$tmp/plots" 2>&1 | grep -F 'wrote')" ]; then
  for f in effective_experts gap_cdf utilisation_2 utilisation_3 route_map_0_2_0_0 route_map_0_3_1_3; do
    [ "$(head -c 8 "$tmp/plots/$f.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] || bad "plot $f.png"
  done
  echo "ok   plots"
else
  echo "skip plots (no PNG writer in this build)"
fi

# ---- mask --------------------------------------------------------------------------------------
expect mask 0 "" av routes mask "$tmp/s1.safetensors" "$tmp/s2.safetensors" --keep 4 --rule modality --out "$tmp/mask.safetensors"
expect masked 0 "" gen_m2 --expert-mask "$tmp/mask.safetensors" --route-stats "$tmp/masked.safetensors"
expect masked-nvfp4-bf16 0 "" gen_m2 --precision bf16 --nvfp4-experts --expert-mask "$tmp/mask.safetensors" \
  --route-stats "$tmp/masked16.safetensors"
"$py" - "$tmp/mask.safetensors" "$tmp/masked.safetensors" "$tmp/masked16.safetensors" <<'PY' || bad "masked runs chose a masked expert"
import sys
import numpy as np
from safetensors.numpy import load_file
keep = load_file(sys.argv[1])["keep"]
assert keep.shape == (2, 2, 16) and (keep.sum(axis=2) == 4).all()
for f in sys.argv[2:]:
    c = load_file(f)["counts"].sum(axis=(2, 3, 4))  # [L, H, E]
    assert (c[keep == 0] == 0).all(), f
    assert c.sum() == 153 * 4 * 2 * 2 * 3, c.sum()
PY
expect analyze-masked 0 "" av routes analyze "$tmp/masked.safetensors" --json
"$py" -c "import json,sys; j=json.load(open('$tmp/out.txt')); sys.exit(0 if len(j['dead_pairs']) >= 2*2*12 else 1)" \
  || bad "a 4-of-16 mask leaves at least 12 dead experts per head"

# ---- pipeline mode -----------------------------------------------------------------------------
expect init-pipeline 0 "" av -q init --pipeline magi2 --size tiny --out "$tmp/p"
expect pipeline 0 "" av -q generate --model "$tmp/p" --prompt "a red fox" --seconds 1 --steps 2 --no-cache --no-refine \
  --out "$tmp/p.safetensors" --route-stats "$tmp/ps.safetensors" --route-maps 3:1:1 --expert-mask "$tmp/mask.safetensors"
expect analyze-pipeline 0 "" av routes analyze "$tmp/ps.safetensors" --json
# The route map over the decoded frames (builds with the PNG writer).
if grep -q wrote <(av routes analyze "$tmp/ps.safetensors" --plots "$tmp/pplots" --frames "$tmp/p.safetensors" 2>&1); then
  [ "$(head -c 8 "$tmp/pplots/route_frames_0_3_1_1.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] \
    || bad "route map over the decoded frames"
fi
expect frames-without-plots 2 "--frames needs --plots" av routes analyze "$tmp/ps.safetensors" --frames "$tmp/p.safetensors"
expect frames-not-a-clip 2 "no tensor 'frames'" av routes analyze "$tmp/ps.safetensors" --plots "$W/pl" --frames "$tmp/s1.safetensors"

# ---- bad input ---------------------------------------------------------------------------------
python3 - "$M2/config.json" "$tmp/cfg8.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["arch_config"]["moe_config"]["num_experts"] = 8
json.dump(c, open(sys.argv[2], "w"))
PY
expect init8 0 "" av -q init --config "$tmp/cfg8.json" --out "$tmp/m8" --seed 3
MODEL=$tmp/m8 expect stats8 0 "" gen_m2 --route-stats "$tmp/s8.safetensors"
expect mask8 0 "" av routes mask "$tmp/s8.safetensors" --keep 3 --rule global --out "$tmp/mask8.safetensors"
expect merge-configs 2 "router statistics of another model" av routes analyze "$tmp/s1.safetensors" "$tmp/s8.safetensors"
expect merge-configs-mask 2 "s8.safetensors" av routes mask "$tmp/s1.safetensors" "$tmp/s8.safetensors" --keep 4 \
  --rule global --out "$W/m.safetensors"
expect mask-other-model 2 "mask8.safetensors: a mask for" gen_m2 --expert-mask "$tmp/mask8.safetensors" --out "$W/x.safetensors"
"$py" - "$tmp/mask.safetensors" "$tmp/mask_bad.safetensors" <<'PY'
import sys
import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file
with safe_open(sys.argv[1], "np") as f:
    meta = f.metadata()
    t = {k: f.get_tensor(k) for k in f.keys()}
t["keep"] = np.ones((2, 2, 8), dtype=np.uint8)  # 8 experts where the metadata says 16
save_file(t, sys.argv[2], metadata=meta)
PY
expect mask-wrong-shape 2 "tensor keep is U8 [2, 2, 8]" gen_m2 --expert-mask "$tmp/mask_bad.safetensors" --out "$W/x.safetensors"
expect keep-low 2 "--keep 2: expected 3 (top_k) to 16" av routes mask "$tmp/s1.safetensors" --keep 2 --rule global --out "$W/m.safetensors"
expect keep-high 2 "--keep 17: expected 3 (top_k) to 16" av routes mask "$tmp/s1.safetensors" --keep 17 --rule global --out "$W/m.safetensors"
expect keep-rule 2 "--rule median" av routes mask "$tmp/s1.safetensors" --keep 4 --rule median --out "$W/m.safetensors"
expect not-stats 2 "not a router statistics file" av routes analyze "$M2/model.safetensors"
expect maps-syntax 2 "--route-maps: '2:0'" gen_m2 --route-stats "$W/s.safetensors" --route-maps 2:0
expect maps-not-moe 2 "block 1 is not a MoE layer" gen_m2 --route-stats "$W/s.safetensors" --route-maps 1:0:0
expect maps-step 2 "step 4 of a 4-step run" gen_m2 --route-stats "$W/s.safetensors" --route-maps 2:0:4
expect maps-alone 2 "--route-maps needs --route-stats" gen_m2 --route-maps 2:0:0 --out "$W/x.safetensors"
expect stats-is-out 2 "--route-stats" gen_m2 --out "$W/x.safetensors" --route-stats "$W/x.safetensors"
expect stats-on-h3 2 "not a MAGI-2 model" av -q generate --model "$H3" --text "$H3/inputs.safetensors" \
  --latent-shape 2,4,6,9 --steps 1 --route-stats "$W/s.safetensors"

exit $failed
