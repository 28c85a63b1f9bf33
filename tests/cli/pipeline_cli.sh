#!/usr/bin/env bash
# `avdit init --pipeline` + `avdit generate --prompt`: both tiny release folders from a prompt to an
# mp4 that ffprobe reads (frames, fps, size, duration, two audio channels: lib/media_check.py),
# bit-identical reruns (the SHA-256 of the latents, frames, waveform and mp4) with the prompt-state
# cache cold, warm and off, the enhancer in the pipeline (a local chat server's caption, an
# unreachable one with and without --enhance-optional), MAGI-2's two stages (the tiny refiner:
# 2T - 1 latent frames at the refiner's size, its preview latent the --no-refine run's), and bad
# input: a missing component, a size the model does not take, a refiner config the op cannot take
# or whose latents do not fit the preview's, a full disk (exit 2 or 1, one line, no mp4 left).
# Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$@"
export XDG_CACHE_HOME=$tmp/xdg  # never the user's own cache
unset AVDIT_ENHANCE_API_KEY OPENAI_API_KEY http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy
export no_proxy=127.0.0.1
check() { "$py" "$src/tests/cli/lib/media_check.py" "$@" || fail "media_check.py $*"; }
shas() { grep -E "sha256 [0-9a-f]{64}$" "$1" | sed 's/.*sha256 //'; }

"$avdit" -q init --pipeline h3 --size tiny --out "$tmp/h3" || fail "init h3"
"$avdit" -q init --pipeline magi2 --size tiny --out "$tmp/m2" || fail "init magi2"
for f in model_index.json transformer/config.json text_encoder/model.safetensors tokenizer/vocab.json \
  video_vae/config.json audio_vae/model.safetensors; do
  [ -f "$tmp/h3/$f" ] || fail "h3 pipeline: no $f"
done
for f in preview/config.json text_encoder/vocab.json turbo_vae/model.safetensors vae/config.json \
  stable-audio-open-1.0/model.safetensors refiner/config.json refiner/model.safetensors; do
  [ -f "$tmp/m2/$f" ] || fail "magi2 pipeline: no $f"
done
[ "$(ls -A "$tmp" | grep -c '^\.')" = 0 ] || fail "init left a temporary folder: $(ls -A "$tmp")"
"$avdit" -q init --pipeline h3 --out "$tmp/h3" 2>"$tmp/err" && fail "init over a pipeline succeeded"
grep -q "exists and is not an empty folder" "$tmp/err" || fail "init over a pipeline: $(cat "$tmp/err")"

# inspect: every component in stage order; the weights the run reads (the tiny H3 encoder: all 6
# layers, fewer than 50) and the largest stage's GPU weights, checked against the safetensors headers.
"$avdit" inspect "$tmp/h3" --json >"$tmp/inspect.json" || fail "inspect pipeline"
"$py" - "$tmp/inspect.json" "$tmp/h3" <<'PY' || fail "inspect pipeline figures"
import json, struct, sys
j = json.load(open(sys.argv[1]))
assert [c["stage"] for c in j["components"]] == ["encode", "sample", "decode video", "decode audio"], j
def params(path, keep=lambda k: True):
    b = open(path, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    out = 0
    for k, v in h.items():
        if k != "__metadata__" and keep(k):
            e = 1
            for d in v["shape"]: e *= d
            out += e
    return out
# The encoder reads its embedding and decoder layers: not the vision tower, final norm or lm_head.
lm = lambda k: k.startswith(("model.language_model.embed_tokens.", "model.language_model.layers."))
for c, sub, keep in zip(j["components"], ["text_encoder", "transformer", "video_vae", "audio_vae"],
                        [lm, lambda k: True, lambda k: True, lambda k: True]):
    assert c["params"] == params(f"{sys.argv[2]}/{sub}/model.safetensors", keep), (c, sub)
assert j["peak_gpu_weight_bytes"] == max(c["gpu_weight_bytes"] for c in j["components"])
PY
# The MAGI-2 folder's refiner is a stage of its own, between the preview and the decoders.
"$avdit" inspect "$tmp/m2" --json >"$tmp/inspect2.json" || fail "inspect magi2 pipeline"
"$py" - "$tmp/inspect2.json" "$tmp/m2/refiner/model.safetensors" <<'PY' || fail "inspect magi2 refiner"
import json, struct, sys
j = json.load(open(sys.argv[1]))
assert [c["stage"] for c in j["components"]] == ["encode", "sample", "refine", "decode video", "decode audio"], j
b = open(sys.argv[2], "rb").read(); h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
n = 0
for k, v in h.items():
    if k != "__metadata__":
        e = 1
        for d in v["shape"]: e *= d
        n += e
assert j["components"][2]["params"] == n, (j["components"][2], n)
PY

P="A red fox runs through fresh snow at dawn."
h3() { "$avdit" generate --model "$tmp/h3" --prompt "$P" --frames 22 --height 64 --width 96 --steps 3 "$@"; }
# The preview alone (--no-refine); the two-stage run is checked after these.
m2() { "$avdit" ${Q:-} generate --model "$tmp/m2" --prompt "$P" --seconds 2 --height 64 --width 96 --steps 3 --no-refine "$@"; }

# H3: 22 frames at 24 fps (the 17n+5 grid), 96x64 from the tiny VAE, 32 kHz stereo.
h3 --out "$tmp/a.mp4" --keep-latents "$tmp/a.safetensors" >"$tmp/a.txt" 2>"$tmp/a.err" ||
  fail "h3 pipeline: $(cat "$tmp/a.err")"
check mp4 "$tmp/a.mp4" --frames 22 --width 96 --height 64 --fps 24 --rate 32000
# The tiny canvas and length are legal but not what the release supports: one warning line.
grep -q "^avdit warning: H3: 64x96 (height x width) is not a canvas .* the nearest is 768x1024 (4:3).*; 22 frames" \
  "$tmp/a.err" || fail "no canvas warning: $(cat "$tmp/a.err")"
grep -q "^| encode | .* | 20 tokens encoded |$" "$tmp/a.txt" || fail "h3 stage table: $(cat "$tmp/a.txt")"
for s in tokenize encode sample "decode video" "decode audio" mux; do
  grep -q "^| $s | " "$tmp/a.txt" || fail "no $s stage: $(cat "$tmp/a.txt")"
done
[ "$(shas "$tmp/a.txt" | wc -l)" = 5 ] || fail "expected 5 SHA-256 lines: $(cat "$tmp/a.txt")"
# Warm: the states come from the cache; every SHA-256 the same, the mp4's included.
h3 --out "$tmp/b.mp4" >"$tmp/b.txt" 2>&1 || fail "h3 warm: $(cat "$tmp/b.txt")"
grep -q "^| encode | .* | prompt-state cache hit |$" "$tmp/b.txt" || fail "no cache hit: $(cat "$tmp/b.txt")"
[ "$(shas "$tmp/a.txt")" = "$(shas "$tmp/b.txt")" ] || fail "h3 warm run differs"
cmp -s "$tmp/a.mp4" "$tmp/b.mp4" || fail "h3 warm mp4 differs"
grep -q "^| sample | .* | 3 steps, adaLN table of 3 timestep sets (cached) |$" "$tmp/b.txt" ||
  fail "no adaLN table cache hit: $(cat "$tmp/b.txt")"
h3 --out "$tmp/c.mp4" --no-cache >"$tmp/c.txt" 2>&1 || fail "h3 no cache: $(cat "$tmp/c.txt")"
[ "$(shas "$tmp/a.txt")" = "$(shas "$tmp/c.txt")" ] || fail "h3 run without the cache differs"
grep -q "adaLN table of 3 timestep sets (computed at load)" "$tmp/c.txt" || fail "table: $(cat "$tmp/c.txt")"
# The adaLN table (each step's modulation computed ahead by the same linears) changes no bit.
h3 --out "$tmp/d.mp4" --no-cache --no-adaln-table >"$tmp/d.txt" 2>&1 || fail "h3 no table: $(cat "$tmp/d.txt")"
[ "$(shas "$tmp/a.txt")" = "$(shas "$tmp/d.txt")" ] || fail "h3 run without the adaLN table differs"
grep -q "^| sample | .* | 3 steps |$" "$tmp/d.txt" || fail "--no-adaln-table: $(cat "$tmp/d.txt")"
# The kept latents are what `avdit decode` turns into the same frames' clip.
"$py" - "$tmp/a.safetensors" <<'PY' || fail "kept latents"
import sys
import ml_dtypes  # noqa: F401 (numpy learns bfloat16)
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
assert t["final_video"].shape == (1, 24, 7, 4, 6), t["final_video"].shape
assert t["final_audio"].shape == (2, 32, 37), t["final_audio"].shape
assert t["text_embeds"].shape[0] == 20 and t["text_token_tags"].shape == (20,)
PY

# MAGI-2: 2 s -> 50 frames -> 7 latent frames -> TurboVAED's 25 frames at 12.5 fps, 44.1 kHz.
m2 --out "$tmp/m.mp4" >"$tmp/m.txt" 2>"$tmp/m.err" || fail "magi2 pipeline: $(cat "$tmp/m.err")"
check mp4 "$tmp/m.mp4" --frames 25 --width 96 --height 64 --fps 25/2 --rate 44100
grep -q "^| tokenize | .* | 20 tokens + [0-9]* negative |$" "$tmp/m.txt" ||
  fail "magi2 uses the reference's negative prompt by default: $(cat "$tmp/m.txt")"
grep -q "^| sample | .* | 3 steps with CFG |$" "$tmp/m.txt" || fail "magi2 CFG: $(cat "$tmp/m.txt")"
m2 --out "$tmp/n.mp4" >"$tmp/n.txt" 2>&1 || fail "magi2 warm: $(cat "$tmp/n.txt")"
grep -q "prompt-state cache hit" "$tmp/n.txt" || fail "magi2: no cache hit"
[ "$(shas "$tmp/m.txt")" = "$(shas "$tmp/n.txt")" ] || fail "magi2 warm run differs"
m2 --out "$tmp/o.mp4" --no-negative-prompt >"$tmp/o.txt" 2>&1 || fail "magi2 no negative"
grep -q "^| tokenize | .* | 20 tokens |$" "$tmp/o.txt" || fail "--no-negative-prompt: $(cat "$tmp/o.txt")"
[ "$(shas "$tmp/m.txt" | head -1)" != "$(shas "$tmp/o.txt" | head -1)" ] ||
  fail "the negative prompt made no difference to the latents"

# Both stages (the default with refiner/): the refiner upsamples the preview's 7 latent frames to
# 2 * 7 - 1 = 13 at twice the preview's size (128x192, its 8x12 latent grid), TurboVAED makes 49
# frames at twice the rate over the same 2 s; the audio is the preview's. Its preview latent is
# the --no-refine run's final one, bit for bit.
"$avdit" generate --model "$tmp/m2" --prompt "$P" --seconds 2 --height 64 --width 96 --steps 3 \
  --refine-steps 2 --out "$tmp/r.mp4" >"$tmp/r.txt" 2>"$tmp/r.err" || fail "magi2 two stages: $(cat "$tmp/r.err")"
check mp4 "$tmp/r.mp4" --frames 49 --width 192 --height 128 --fps 25 --rate 44100
grep -q "^| refine | .* | 2 steps to \[1, 48, 13, 8, 12\] (128x192 px), window 8x4x4 blocks |$" "$tmp/r.txt" ||
  fail "no refine stage: $(cat "$tmp/r.txt")"
grep -q "^final_video \[1, 48, 13, 8, 12\]  sha256" "$tmp/r.txt" || fail "refined latent: $(cat "$tmp/r.txt")"
[ "$(sed -n 's/^preview_video \[1, 48, 7, 4, 6\]  sha256 //p' "$tmp/r.txt")" = "$(shas "$tmp/m.txt" | head -1)" ] ||
  fail "the refined run's preview latent is not the --no-refine run's: $(cat "$tmp/r.txt")"
[ "$(shas "$tmp/r.txt" | sed -n 2p)" = "$(shas "$tmp/m.txt" | sed -n 2p)" ] ||
  fail "the refined run's audio latent is not the preview's"

# The enhancer: a local server's caption replaces the prompt (more tokens); no server is an error
# unless --enhance-optional.
mkdir -p "$tmp/enh" && cp "$src"/tests/fixtures/enhance/*.json "$tmp/enh/"
printf '%s' '{"caption_file": "t2v_caption.json", "answers": [{"content": "@CAPTION@"}]}' >"$tmp/enh/s.json"
python3 "$src/tests/tools/chat_server.py" --scenario "$tmp/enh/s.json" --record "$tmp/requests.json" \
  --port-file "$tmp/port" --lifetime 60 >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 200); do [ -s "$tmp/port" ] && break; sleep 0.02; done
[ -s "$tmp/port" ] || fail "the chat server did not start"
{
  m2 --out "$tmp/e.mp4" --enhance "http://127.0.0.1:$(cat "$tmp/port")/v1" --enhance-model test \
    >"$tmp/e.txt" 2>&1 || fail "enhanced run: $(cat "$tmp/e.txt")"
  grep -q "^| enhance | " "$tmp/e.txt" || fail "no enhance stage: $(cat "$tmp/e.txt")"
  tokens=$(sed -n 's/^| tokenize | .* | \([0-9]*\) tokens + .*/\1/p' "$tmp/e.txt")
  [ "${tokens:-0}" -gt 20 ] || fail "the caption did not replace the prompt: $(cat "$tmp/e.txt")"
}
bad_enh=(--enhance http://127.0.0.1:9/v1 --enhance-model test --enhance-connect-timeout 0.5
  --enhance-max-time 2 --enhance-backoff 0.05 --no-enhance-cache)
set +e
Q=-q m2 --out "$tmp/u.mp4" "${bad_enh[@]}" >"$tmp/u.txt" 2>"$tmp/u.err"
rc=$?
set -e
[ $rc = 2 ] && [ "$(wc -l <"$tmp/u.err")" = 1 ] || fail "unreachable enhancer: exit $rc: $(cat "$tmp/u.err")"
[ ! -e "$tmp/u.mp4" ] || fail "unreachable enhancer left an mp4"
m2 --out "$tmp/v.mp4" "${bad_enh[@]}" --enhance-optional >"$tmp/v.txt" 2>&1 ||
  fail "--enhance-optional: $(cat "$tmp/v.txt")"
[ "$(shas "$tmp/m.txt" | head -4)" = "$(shas "$tmp/v.txt" | head -4)" ] ||
  fail "--enhance-optional without a server is not the raw prompt's clip"

# Bad input: exit 2, one line naming the problem, no mp4.
expect() {  # expect CODE PATTERN ARGS...
  local code=$1 pattern=$2
  shift 2
  set +e
  "$avdit" -q generate "$@" >"$tmp/x.txt" 2>"$tmp/x.err"
  local rc=$?
  set -e
  [ $rc = "$code" ] || fail "exit $rc, expected $code: $* : $(cat "$tmp/x.err")"
  [ "$(wc -l <"$tmp/x.err")" = 1 ] || fail "not one line: $(cat "$tmp/x.err")"
  grep -q -- "$pattern" "$tmp/x.err" || fail "message: $(cat "$tmp/x.err") (expected $pattern)"
  [ ! -e "$tmp/x.mp4" ] || fail "an mp4 was left: $*"
}
cp -r "$tmp/h3" "$tmp/h3-broken" && rm -r "$tmp/h3-broken/audio_vae"
expect 2 "h3-broken/audio_vae: no such folder (the MiniMax-H3 audio VAE; pass --audio-vae DIR" \
  --model "$tmp/h3-broken" --prompt "$P" --frames 22 --height 64 --width 96 --out "$tmp/x.mp4"
expect 2 "multiples of 32" --model "$tmp/h3" --prompt "$P" --frames 22 --height 70 --width 96 --out "$tmp/x.mp4"
expect 2 "multiples of the VAE's 16x16" --model "$tmp/m2" --prompt "$P" --seconds 2 --height 72 --width 96 \
  --out "$tmp/x.mp4"
expect 2 "not a pipeline folder" --model "$shared/golden/h3-tiny" --prompt "$P" --out "$tmp/x.mp4"
# The refiner's settings are checked before the preview samples: its size grid, a window level
# the op has no kernel for, video latents of other channels than the preview's (via --refiner).
r2=(--model "$tmp/m2" --prompt "$P" --seconds 2 --height 64 --width 96 --steps 1 --out "$tmp/x.mp4")
expect 2 "refine-height/--refine-width 100x192: the refiner makes multiples of its vae_stride 16x16" \
  "${r2[@]}" --refine-height 100
expect 2 "options set the MAGI-2 refiner stage, which this run does not have (--no-refine)" \
  "${r2[@]}" --no-refine --refine-steps 2
cp -r "$tmp/m2/refiner" "$tmp/rf-window" && cp -r "$tmp/m2/refiner" "$tmp/rf-channels"
"$py" - "$tmp/rf-window/config.json" "$tmp/rf-channels/config.json" <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))
w["evaluation_config"]["magi2_refiner_data_proxy_config"]["attn_config"]["window"]["level"] = "frame"
json.dump(w, open(sys.argv[1], "w"))
c = json.load(open(sys.argv[2]))
c["magi2_refiner_arch_config"]["video_in_channels"] = 16
json.dump(c, open(sys.argv[2], "w"))
PY
expect 2 "rf-window/config.json: magi2 refiner config: .*window level 'frame' / block_mode 'grid' is not supported" \
  "${r2[@]}" --refiner "$tmp/rf-window"
expect 2 "rf-channels/config.json: the refiner takes video latents of 16 channels, the preview .* makes \[1, C, T, h, w\] = \[1, 48, 7, 4, 6\]" \
  "${r2[@]}" --refiner "$tmp/rf-channels"
expect 2 "only MAGI-2 pipelines have a refiner" --model "$tmp/h3" --prompt "$P" --frames 22 --height 64 \
  --width 96 --refiner "$tmp/m2/refiner" --out "$tmp/x.mp4"
expect 2 "pipeline mode writes an .mp4" --model "$tmp/h3" --prompt "$P" --out "$tmp/x.wav"
# .safetensors: the decoded clip itself, the same frames and waveform the mp4 run hashed.
h3 --out "$tmp/raw.safetensors" >"$tmp/raw.txt" 2>&1 || fail "raw clip: $(cat "$tmp/raw.txt")"
[ "$(shas "$tmp/a.txt" | head -4)" = "$(shas "$tmp/raw.txt" | head -4)" ] || fail "raw clip differs"
"$py" - "$tmp/raw.safetensors" <<'PY' || fail "raw clip tensors"
import sys
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
assert t["frames"].shape == (22, 3, 64, 96) and t["waveform"].shape[0] == 2, {k: v.shape for k, v in t.items()}
PY
expect 2 "MiniMax-H3 is CFG-distilled" --model "$tmp/h3" --prompt "$P" --negative-prompt "blur" --out "$tmp/x.mp4"
# A full disk while writing the mp4 (a file-size limit: EFBIG, SIGXFSZ ignored): exit 1, no mp4.
(
  ulimit -f 4
  trap '' XFSZ
  set +e
  "$avdit" -q generate --model "$tmp/h3" --prompt "$P" --frames 22 --height 64 --width 96 --steps 1 \
    --no-cache --out "$tmp/x.mp4" >"$tmp/x.txt" 2>"$tmp/x.err"
  rc=$?
  set -e
  [ $rc = 1 ] || fail "full disk: exit $rc: $(cat "$tmp/x.err")"
  grep -q "File too large" "$tmp/x.err" || fail "full disk: $(cat "$tmp/x.err")"
) || exit 1
[ ! -e "$tmp/x.mp4" ] || fail "full disk left an mp4"
[ -z "$(ls -A "$tmp" | grep 'x.mp4.')" ] || fail "full disk left a temporary file: $(ls -A "$tmp")"
echo "ok"
