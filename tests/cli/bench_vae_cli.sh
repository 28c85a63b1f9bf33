#!/usr/bin/env bash
# `avdit bench vae` on the CPU with the small decoders: the full-size checkpoint it makes has the
# release's widths (the READMEs' production values), a decode's row names its output and memory,
# an estimate says that it is one, bf16 runs for a video decoder, and bad options exit 2 with one
# line. No figure is checked: times are the benchmark's output, not a test's. Arguments:
# AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$1" "$2"

bench() { "$avdit" -q bench vae --shared "$shared" "$@"; }

# H3 audio: decoder_dim 1024 and DAC latent_dim 2048 (README), 0.5 s = 20 latent frames of 800
# samples at 32 kHz.
bench --decoder h3audio --seconds 0.5 --work "$tmp/h3a" --json "$tmp/h3a.json" >"$tmp/h3a.txt"
python3 - "$tmp" <<'PY' || fail "h3audio: $(cat "$tmp/h3a.txt")"
import glob, json, struct, sys
t = sys.argv[1]
def shapes(folder):
    out = {}
    for f in glob.glob(f"{folder}/*.safetensors"):
        h = open(f, "rb"); n = struct.unpack("<Q", h.read(8))[0]
        out.update({k: v["shape"] for k, v in json.loads(h.read(n)).items() if k != "__metadata__"})
    return out
s = shapes(f"{t}/h3a")
assert s["dec_in_proj.weight"] == [2048, 32, 1], s["dec_in_proj.weight"]
assert s["decoder.conv_pre.parametrizations.weight.original1"] == [1024, 2048, 7]
assert s["decoder.conv_post.parametrizations.weight.original1"] == [1, 8, 7]
row = json.load(open(f"{t}/h3a.json"))
row = row["rows"][0] if isinstance(row, dict) else row[0]
assert row["decoder"] == "h3audio" and row["mode"] == "full", row
assert row["latent"] == "[1, 32, 20]" and row["output"] == "[1, 16000]", row
assert row["s"] > 0 and row["host peak GB"] > 0, row
PY

# Oobleck: channels 128 (README), so the first conv maps the 64 latent channels to 128 x 16.
bench --decoder oobleck --seconds 0.2 --work "$tmp/sa" >"$tmp/sa.txt"
grep -q "| oobleck | cpu | fp32 | 0.2 s | \[5, 64\] | full |" "$tmp/sa.txt" || fail "oobleck: $(cat "$tmp/sa.txt")"
python3 - "$tmp/sa/model.safetensors" <<'PY' || fail "oobleck weights"
import json, struct, sys
h = open(sys.argv[1], "rb"); n = struct.unpack("<Q", h.read(8))[0]; s = json.loads(h.read(n))
assert s["decoder.layers.0.weight_v"]["shape"] == [2048, 64, 7], s["decoder.layers.0.weight_v"]
PY

# TurboVAED (release widths 64..512, one more resnet per stack) as an estimate: 29 frames are 8
# latent frames, more than two windows of 7.
bench --decoder turbo --frames 29 --height 32 --width 32 --estimate always --work "$tmp/tv" >"$tmp/tv.txt"
grep -q "| turbo | cpu | fp32 | 29 x 32x32 | \[1, 48, 8, 2, 2\] | estimate |" "$tmp/tv.txt" ||
  fail "turbo: $(cat "$tmp/tv.txt")"
grep -q "^estimate: 7 and 8 latent frames of 2x2 cells timed" "$tmp/tv.txt" || fail "turbo: $(cat "$tmp/tv.txt")"
# In bf16 (the weights folder reused), one window of one cell: the row says bf16, the decoder BF16.
bench --decoder turbo --precision bf16 --frames 5 --height 16 --width 16 --work "$tmp/tv" >"$tmp/tvb.txt"
grep -q "| turbo | cpu | bf16 | 5 x 16x16 | \[1, 48, 2, 1, 1\] | full |" "$tmp/tvb.txt" ||
  fail "turbo bf16: $(cat "$tmp/tvb.txt")"
grep -q "TurboVAED.*BF16" "$tmp/tvb.txt" || fail "turbo bf16: $(cat "$tmp/tvb.txt")"

# Bad options: exit 2, one line naming the option.
expect2() {
  local want=$1; shift
  set +e; "$avdit" -q bench vae --shared "$shared" --work "$tmp/bad" "$@" >"$tmp/o.txt" 2>"$tmp/e.txt"; local rc=$?; set -e
  [ $rc -eq 2 ] || fail "$*: exit $rc, expected 2 ($(cat "$tmp/e.txt"))"
  [ "$(wc -l <"$tmp/e.txt")" -eq 1 ] || fail "$*: $(cat "$tmp/e.txt")"
  grep -q -- "$want" "$tmp/e.txt" || fail "$*: $(cat "$tmp/e.txt")"
}
expect2 "--precision bf16" --decoder oobleck --precision bf16
expect2 "--frames 6" --decoder turbo --frames 6
expect2 "--height 40" --decoder turbo --frames 5 --height 40 --width 32
echo "bench vae: ok"
