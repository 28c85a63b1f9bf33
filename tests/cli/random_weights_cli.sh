#!/usr/bin/env bash
# `avdit generate --random-weights`: both tiny pipelines without their weight files (`avdit init
# --configs-only`, and a whole folder with its .safetensors removed) run from a prompt to the
# decoded clip with random weights: the same SHA-256 for the same seed (cold, warm, without the
# caches, without H3's adaLN table), other bits for another seed, cache entries of their own (a run
# of the real weights after them misses the caches and equals its cache-free run), and without the
# flag the weightless folder exits 2 naming the DiT folder. `init --size full --configs-only` writes
# the release's configs alone. Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$@"
export XDG_CACHE_HOME=$tmp/xdg  # never the user's own cache
shas() { grep -E "sha256 [0-9a-f]{64}$" "$1" | sed 's/.*sha256 //'; }
count() { find "$XDG_CACHE_HOME/avdit/$1" -name '*.safetensors' 2>/dev/null | wc -l; }
no_weights() {
  [ -z "$(find "$1" -name '*.safetensors' -o -name '*.safetensors.index.json')" ] ||
    fail "$1 holds weight files: $(find "$1" -name '*.safetensors*')"
}

"$avdit" -q init --pipeline h3 --size tiny --configs-only --out "$tmp/h3" || fail "init h3 --configs-only"
"$avdit" -q init --pipeline magi2 --size tiny --out "$tmp/m2" || fail "init magi2"
find "$tmp/m2" -name '*.safetensors' -delete
no_weights "$tmp/h3"
no_weights "$tmp/m2"
for f in model_index.json transformer/config.json text_encoder/config.json tokenizer/vocab.json \
  video_vae/config.json audio_vae/config.json; do
  [ -f "$tmp/h3/$f" ] || fail "h3 --configs-only: no $f"
done

# inspect reads a weightless folder: each component listed, marked configs only.
"$avdit" inspect "$tmp/h3" >"$tmp/inspect.txt" 2>&1 || fail "inspect configs-only: $(cat "$tmp/inspect.txt")"
[ "$(grep -c "| configs only | - |$" "$tmp/inspect.txt")" = 4 ] || fail "inspect configs-only: $(cat "$tmp/inspect.txt")"

P="A red fox runs through fresh snow at dawn."
h3() { "$avdit" generate --model "$tmp/h3" --random-weights --prompt "$P" --frames 22 --height 64 --width 96 --steps 2 "$@"; }
m2() { "$avdit" generate --model "$tmp/m2" --random-weights --prompt "$P" --seconds 2 --height 64 --width 96 --steps 2 "$@"; }

# H3: every stage runs; the decoders' random folders are their own stage, before tokenize.
h3 --seed 1 --out "$tmp/a.safetensors" --keep-latents "$tmp/a.lat.safetensors" >"$tmp/a.txt" 2>"$tmp/a.err" ||
  fail "h3 random: $(cat "$tmp/a.err")"
grep -q "^h3 pipeline (random weights, seed 1): 2 steps" "$tmp/a.txt" || fail "h3 header: $(cat "$tmp/a.txt")"
for s in "decoder weights" tokenize encode sample "decode video" "decode audio" write; do
  grep -q "^| $s | " "$tmp/a.txt" || fail "no $s stage: $(cat "$tmp/a.txt")"
done
grep -q "^| decoder weights | .* | random tiny-size MiniMax-H3 video VAE weights (written in .*); random tiny-size MiniMax-H3 audio VAE weights (written in .*) |$" \
  "$tmp/a.txt" || fail "decoder weights: $(cat "$tmp/a.txt")"
grep -q "^| encode | .* | [0-9]* tokens encoded, random weights |$" "$tmp/a.txt" || fail "encode: $(cat "$tmp/a.txt")"
grep -q "^| sample | .* | 2 steps, adaLN table of 2 timestep sets (computed at load), random weights |$" \
  "$tmp/a.txt" || fail "sample: $(cat "$tmp/a.txt")"
[ "$(shas "$tmp/a.txt" | wc -l)" = 5 ] || fail "expected 5 SHA-256 lines: $(cat "$tmp/a.txt")"
"$py" - "$tmp/a.safetensors" "$tmp/a.lat.safetensors" <<'PY' || fail "h3 random clip"
import sys
import numpy as np
import ml_dtypes  # noqa: F401 (numpy learns bfloat16)
from safetensors.numpy import load_file
c = load_file(sys.argv[1])
assert c["frames"].shape == (22, 3, 64, 96) and c["waveform"].shape == (2, 29600), c
for k, v in c.items():
    assert np.isfinite(v).all() and v.std() > 0, k
t = load_file(sys.argv[2])
assert t["final_video"].shape == (1, 24, 7, 4, 6) and np.isfinite(t["final_video"]).all()
PY
# Warm (prompt states, adaLN table and decoder folders from the cache), without the caches, and
# without the table: the same bits.
h3 --seed 1 --out "$tmp/b.safetensors" >"$tmp/b.txt" 2>&1 || fail "h3 warm: $(cat "$tmp/b.txt")"
grep -q "^| encode | .* | prompt-state cache hit, random weights |$" "$tmp/b.txt" || fail "warm encode: $(cat "$tmp/b.txt")"
grep -q "adaLN table of 2 timestep sets (cached), random weights" "$tmp/b.txt" || fail "warm table: $(cat "$tmp/b.txt")"
grep -q "video VAE weights (cached); .* audio VAE weights (cached)" "$tmp/b.txt" || fail "warm decoders: $(cat "$tmp/b.txt")"
[ "$(shas "$tmp/a.txt" | head -4)" = "$(shas "$tmp/b.txt" | head -4)" ] || fail "h3 warm run differs"
cmp -s "$tmp/a.safetensors" "$tmp/b.safetensors" || fail "h3 warm clip differs"
# Without a cache the decoder folders are temporary: none is left.
mkdir "$tmp/t"
TMPDIR=$tmp/t h3 --seed 1 --out "$tmp/c.safetensors" --no-cache >"$tmp/c.txt" 2>&1 || fail "h3 no cache: $(cat "$tmp/c.txt")"
cmp -s "$tmp/a.safetensors" "$tmp/c.safetensors" || fail "h3 run without the caches differs"
TMPDIR=$tmp/t h3 --seed 1 --out "$tmp/d.safetensors" --no-cache --no-adaln-table >"$tmp/d.txt" 2>&1 ||
  fail "h3 no table: $(cat "$tmp/d.txt")"
cmp -s "$tmp/a.safetensors" "$tmp/d.safetensors" || fail "h3 run without the adaLN table differs"
[ -z "$(ls -A "$tmp/t")" ] || fail "--no-cache left its decoder folders: $(ls -A "$tmp/t")"
# Another seed: other weights, other bits in every output.
h3 --seed 2 --out "$tmp/e.safetensors" >"$tmp/e.txt" 2>&1 || fail "h3 seed 2: $(cat "$tmp/e.txt")"
paste <(shas "$tmp/a.txt") <(shas "$tmp/e.txt") | while read -r x y; do
  [ "$x" != "$y" ] || fail "seed 2 gave a SHA-256 of seed 1: $x"
done

# The real weights (the same configs) beside the random entries: both caches miss, and the result
# is the run's own without the caches.
prompts=$(count prompts) tables=$(count adaln)
"$avdit" -q init --pipeline h3 --size tiny --out "$tmp/h3real" || fail "init h3"
real() { "$avdit" generate --model "$tmp/h3real" --prompt "$P" --frames 22 --height 64 --width 96 --steps 2 --seed 1 "$@"; }
real --out "$tmp/r.safetensors" >"$tmp/r.txt" 2>&1 || fail "h3 real: $(cat "$tmp/r.txt")"
grep -q "^| encode | .* | [0-9]* tokens encoded |$" "$tmp/r.txt" || fail "real weights hit a random entry: $(cat "$tmp/r.txt")"
grep -q "(computed at load)" "$tmp/r.txt" || fail "real weights hit a random table: $(cat "$tmp/r.txt")"
[ "$(count prompts)" = $((prompts + 1)) ] && [ "$(count adaln)" = $((tables + 1)) ] ||
  fail "real weights: cache entries $(count prompts) / $(count adaln), before $prompts / $tables"
real --out "$tmp/s.safetensors" --no-cache >"$tmp/s.txt" 2>&1 || fail "h3 real no cache: $(cat "$tmp/s.txt")"
cmp -s "$tmp/r.safetensors" "$tmp/s.safetensors" || fail "h3 real run differs from its cache-free run"
! cmp -s "$tmp/r.safetensors" "$tmp/a.safetensors" || fail "random and real weights gave one clip"

# MAGI-2 (the folder with its weight files removed): the preview alone, NVFP4 experts, then with
# the refiner stage.
m2 --seed 1 --no-refine --out "$tmp/m.safetensors" >"$tmp/m.txt" 2>"$tmp/m.err" || fail "magi2 random: $(cat "$tmp/m.err")"
grep -q "^magi2-preview pipeline (random weights, seed 1): 2 steps" "$tmp/m.txt" || fail "magi2 header: $(cat "$tmp/m.txt")"
grep -q "^| decoder weights | .* | random tiny-size MAGI-2 TurboVAED weights (written in .*); random tiny-size Stable Audio Open (Oobleck) VAE weights (written in .*) |$" \
  "$tmp/m.txt" || fail "magi2 decoder weights: $(cat "$tmp/m.txt")"
grep -q "^| sample | .* | 2 steps with CFG, random weights |$" "$tmp/m.txt" || fail "magi2 sample: $(cat "$tmp/m.txt")"
m2 --seed 1 --no-refine --out "$tmp/n.safetensors" >"$tmp/n.txt" 2>&1 || fail "magi2 warm: $(cat "$tmp/n.txt")"
cmp -s "$tmp/m.safetensors" "$tmp/n.safetensors" || fail "magi2 rerun differs"
[ "$(shas "$tmp/m.txt" | head -4)" = "$(shas "$tmp/n.txt" | head -4)" ] || fail "magi2 rerun SHA-256 differs"
m2 --seed 2 --no-refine --out "$tmp/o.safetensors" >"$tmp/o.txt" 2>&1 || fail "magi2 seed 2: $(cat "$tmp/o.txt")"
paste <(shas "$tmp/m.txt") <(shas "$tmp/o.txt") | while read -r x y; do
  [ "$x" != "$y" ] || fail "magi2 seed 2 gave a SHA-256 of seed 1: $x"
done
m2 --seed 1 --no-refine --nvfp4-experts --out "$tmp/p.safetensors" >"$tmp/p.txt" 2>&1 || fail "magi2 nvfp4: $(cat "$tmp/p.txt")"
m2 --seed 1 --no-refine --nvfp4-experts --out "$tmp/q.safetensors" >"$tmp/q.txt" 2>&1 || fail "magi2 nvfp4: $(cat "$tmp/q.txt")"
cmp -s "$tmp/p.safetensors" "$tmp/q.safetensors" || fail "magi2 nvfp4 rerun differs"
! cmp -s "$tmp/p.safetensors" "$tmp/m.safetensors" || fail "NVFP4 experts changed nothing"
m2 --seed 1 --refine-steps 1 --out "$tmp/t.safetensors" >"$tmp/t.txt" 2>&1 || fail "magi2 refine: $(cat "$tmp/t.txt")"
grep -q "^| refine | .* | 1 steps to \[1, 48, 13, 8, 12\] .*, random weights |$" "$tmp/t.txt" ||
  fail "magi2 refine: $(cat "$tmp/t.txt")"
grep -q "^preview_video \[1, 48, 7, 4, 6\]  sha256 $(shas "$tmp/m.txt" | head -1)$" "$tmp/t.txt" ||
  fail "the refined run's preview is not the --no-refine run's: $(cat "$tmp/t.txt")"

# Bad input: exit 2, one line.
expect() {
  local pattern=$1; shift
  set +e; "$avdit" -q "$@" >/dev/null 2>"$tmp/x.err"; local rc=$?; set -e
  [ $rc = 2 ] || fail "exit $rc, expected 2: $* : $(cat "$tmp/x.err")"
  [ "$(wc -l <"$tmp/x.err")" = 1 ] || fail "not one line: $(cat "$tmp/x.err")"
  grep -q -- "$pattern" "$tmp/x.err" || fail "message: $(cat "$tmp/x.err") (expected $pattern)"
  [ ! -e "$tmp/x.safetensors" ] || fail "an output was left: $*"
}
# Without the flag the weightless folder names its DiT folder, before anything runs.
expect "h3/transformer: no weights (.safetensors or a shard index) beside its config.json; .* --random-weights" \
  generate --model "$tmp/h3" --prompt "$P" --frames 22 --height 64 --width 96 --out "$tmp/x.safetensors"
expect "m2/preview: no weights (.safetensors or a shard index) beside its config.json; .* --random-weights" \
  generate --model "$tmp/m2" --prompt "$P" --seconds 2 --height 64 --width 96 --out "$tmp/x.safetensors"
expect "--random-weights runs the whole pipeline" \
  generate --model "$tmp/h3real/transformer" --random-weights --text "$tmp/a.lat.safetensors" --out "$tmp/x.safetensors"
# A decoder config of neither size the random weights know.
cp -r "$tmp/h3" "$tmp/h3odd"
"$py" - "$tmp/h3odd/audio_vae/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["DacAudioVAE_kwargs"]["decoder_dim"] = 96
json.dump(c, open(sys.argv[1], "w"))
PY
expect "h3odd/audio_vae: random MiniMax-H3 audio VAE weights are made at the golden tiny model's size or the release's" \
  generate --model "$tmp/h3odd" --random-weights --prompt "$P" --frames 22 --height 64 --width 96 --out "$tmp/x.safetensors"
expect "--size full: the release-size checkpoints are" init --pipeline h3 --size full --out "$tmp/full"

# The release's configs alone, in each release's layout.
"$avdit" -q init --pipeline h3 --size full --configs-only --out "$tmp/h3full" || fail "init h3 full"
"$avdit" -q init --pipeline magi2 --size full --configs-only --out "$tmp/m2full" || fail "init magi2 full"
no_weights "$tmp/h3full"
no_weights "$tmp/m2full"
for f in model_index.json transformer/config.json text_encoder/config.json video_vae/config.json \
  audio_vae/config.json; do
  cmp -s "$shared/reference-configs/h3/FL2VA/$f" "$tmp/h3full/$f" || fail "h3 full: $f is not the release's"
done
cmp -s "$shared/reference-configs/magi2/magi2_preview.json" "$tmp/m2full/preview/config.json" ||
  fail "magi2 full: preview/config.json is not the release's"
"$py" - "$tmp/h3full" "$tmp/m2full" <<'PY' || fail "full configs"
import json, sys
h3, m2 = sys.argv[1:]
assert json.load(open(f"{h3}/transformer/config.json"))["hidden_size"] == 5376
assert len(json.load(open(f"{h3}/tokenizer/vocab.json"))) == 151643
t = json.load(open(f"{m2}/text_encoder/config.json"))
assert t["model_type"] == "qwen3_5" and t["text_config"]["hidden_size"] == 5120, t
assert json.load(open(f"{m2}/turbo_vae/config.json"))["config"]["decoder_block_out_channels"] == [64, 128, 256, 512]
r = json.load(open(f"{m2}/refiner/config.json"))
assert "extends" not in r and r["magi2_refiner_arch_config"]["hidden_size"] == 4096, r.keys()
assert r["arch_config"]["hidden_size"] == 3072  # merged over the preview's
PY
echo "random weights: ok"
