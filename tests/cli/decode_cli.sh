#!/usr/bin/env bash
# `avdit decode` with the five decoders: fixture mode on vae-sa-audio-tiny and
# vae-h3audio-tiny (the final output within the READMEs' float32 bar, the same bytes on a second
# run), latents mode writing a WAV that a RIFF reader accepts (channels, rate, length), the three
# video decoders (fixture mode, mp4 and PNG frames, bf16), and the exit code 2, one-line message and
# absent output of bad input. Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$1" "$2"
lib=$(dirname "${BASH_SOURCE[0]}")/lib
SA=$shared/golden/vae-sa-audio-tiny
H3=$shared/golden/vae-h3audio-tiny

dec() { "$avdit" -q decode "$@"; }

# Fixture mode: two runs (3 threads, then 1), the same bytes; values within 1e-4 of
# max |ref| (both READMEs).
for g in "$SA:waveform_44k" "$H3:waveform"; do
  dir=${g%%:*} key=${g##*:}
  AVDIT_THREADS=3 dec --model "$dir" --inputs "$dir/inputs.safetensors" --out "$tmp/a.safetensors" >"$tmp/a.txt"
  AVDIT_THREADS=1 dec --model "$dir" --inputs "$dir/inputs.safetensors" --out "$tmp/b.safetensors" >/dev/null
  cmp -s "$tmp/a.safetensors" "$tmp/b.safetensors" || fail "$dir: the two fixture outputs differ"
  grep -q "^$key \[.*\] F32  sha256 [0-9a-f]\{64\}$" "$tmp/a.txt" || fail "$dir: $(cat "$tmp/a.txt")"
  python3 "$lib/golden_close.py" "$tmp/a.safetensors" "$dir/outputs.safetensors" 1e-4 "$key" ||
    fail "$dir vs golden"
done

# Latent files for the other cases, written with the standard library alone.
python3 - "$tmp" <<'PY'
import json, math, struct, sys
def write(path, name, shape, values):
    data = struct.pack(f"<{len(values)}f", *values)
    hdr = json.dumps({name: {"dtype": "F32", "shape": shape, "data_offsets": [0, len(data)]}}).encode()
    hdr += b" " * (-len(hdr) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hdr)) + hdr + data)
t = sys.argv[1]
wave = [math.sin(0.1 * i) for i in range(5 * 64)]
write(f"{t}/sa.safetensors", "audio_latents", [5, 64], wave)        # 5 MAGI-2 latent frames
write(f"{t}/h3.safetensors", "latents", [2, 32, 3], wave[:192])     # 3 H3 frames, stereo
write(f"{t}/rank.safetensors", "audio_latents", [1, 5, 64], wave)   # a batch dim too many
write(f"{t}/chan.safetensors", "audio_latents", [10, 32], wave)     # 32 channels, not 64
nan = list(wave); nan[77] = float("nan")
write(f"{t}/nan.safetensors", "audio_latents", [5, 64], nan)
PY

# Latents mode: WAVs a RIFF reader accepts, stereo at the decoder's rate, the expected length
# (MAGI-2: int(5 * 2048 * 441 / 512) = 8820 samples; H3: 3 * 800 = 2400).
dec --model "$SA" --latents "$tmp/sa.safetensors" --out "$tmp/sa.wav" >/dev/null
dec --model "$H3" --latents "$tmp/h3.safetensors" --out "$tmp/h3.wav" --wav-format pcm16 >/dev/null
python3 - "$tmp/sa.wav" "$tmp/h3.wav" <<'PY' || fail "WAV files"
import struct, sys
def riff(path):  # (format tag, channels, rate, bits, frames) from the fmt and data chunks
    b = open(path, "rb").read()
    assert b[:4] == b"RIFF" and b[8:12] == b"WAVE", path
    pos, fmt, frames = 12, None, None
    while pos + 8 <= len(b):
        cid, size = b[pos:pos + 4], struct.unpack("<I", b[pos + 4:pos + 8])[0]
        if cid == b"fmt ": fmt = struct.unpack("<HHIIHH", b[pos + 8:pos + 24])
        if cid == b"data": frames = size // (fmt[1] * fmt[5] // 8)
        pos += 8 + size + (size & 1)
    return fmt[0], fmt[1], fmt[2], fmt[5], frames
sa, h3 = riff(sys.argv[1]), riff(sys.argv[2])
assert sa[1:] == (2, 44100, 32, 8820) and sa[0] in (3, 0xFFFE), sa
assert h3[1:] == (2, 32000, 16, 2400) and h3[0] in (1, 0xFFFE), h3
PY

# Bad input: exit 2, one line naming what is wrong, no output file, nothing on stdout.
bad() {  # bad EXPECTED_REGEX OUT ARGS...
  local want=$1 out=$2 rc=0
  shift 2
  rm -f "$out"
  "$avdit" decode "$@" --out "$out" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ $rc -eq 2 ] || fail "$* gave exit $rc, not 2: $(cat "$tmp/err")"
  [ ! -e "$out" ] || fail "$*: wrote an output"
  [ -z "$(ls -A "$(dirname "$out")" 2>/dev/null | grep '\.tmp$' || true)" ] || fail "$*: left a temporary file"
  [ ! -s "$tmp/out" ] || fail "$* wrote to stdout: $(cat "$tmp/out")"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$*: error is not one line: $(cat "$tmp/err")"
  grep -qE -- "$want" "$tmp/err" || fail "$*: message lacks '$want': $(cat "$tmp/err")"
}
W=$tmp/bad.wav
bad "rank\\.safetensors:audio_latents: latents \\[1, 5, 64\\]: expected \\[T, 64\\]" "$W" --model "$SA" \
  --latents "$tmp/rank.safetensors"
bad "chan\\.safetensors:audio_latents: latents \\[10, 32\\]: expected \\[T, 64\\]" "$W" --model "$SA" \
  --latents "$tmp/chan.safetensors"
bad "expected \\[channels, 32, T\\]" "$W" --model "$H3" --latents "$tmp/sa.safetensors"
bad "nan.safetensors:audio_latents" "$W" --model "$SA" --latents "$tmp/nan.safetensors"
bad "NaN" "$W" --model "$H3" --latents "$tmp/nan.safetensors"
bad "--out" "$tmp/missing/x.wav" --model "$SA" --latents "$tmp/sa.safetensors"
mkdir -p "$tmp/ro" && chmod a-w "$tmp/ro"
if [ ! -w "$tmp/ro" ]; then  # (root writes anywhere)
  bad "--out" "$tmp/ro/x.wav" --model "$SA" --latents "$tmp/sa.safetensors"
fi
bad "expected a \\.wav \\(audio\\), \\.mp4 or FOLDER/" "$tmp/x.mp3" --model "$SA" --latents "$tmp/sa.safetensors"
bad "--latents .*/none\\.safetensors: no such file" "$W" --model "$SA" --latents "$tmp/none.safetensors"
bad "give --latents FILE or --inputs" "$W" --model "$SA"
bad "not a VAE folder" "$W" --model "$shared/golden/h3-tiny" --latents "$tmp/sa.safetensors"
# The video decoders: fixture mode within the READMEs' float32 bar (1e-4 of max |ref|), and
# latents mode to an mp4 (ffprobe: H.264, the frame count, size and rate) and to PNG frames.
for g in vae-wan22-tiny:13:64x48 vae-turbo-tiny:25:48x32 vae-h3video-tiny:26:48x32; do
  v=${g%%:*} rest=${g#*:}
  n=${rest%%:*} size=${rest#*:}
  dir=$shared/golden/$v
  dec --model "$dir" --inputs "$dir/inputs.safetensors" --out "$tmp/v.safetensors" >"$tmp/v.txt" ||
    fail "$v fixture mode: $(cat "$tmp/v.txt")"
  python3 "$lib/golden_close.py" "$tmp/v.safetensors" "$dir/outputs.safetensors" 1e-4 video ||
    fail "$v vs golden"
  fps=24/1
  [ "$v" != vae-turbo-tiny ] || fps=30000/1001
  dec --model "$dir" --latents "$dir/inputs.safetensors" --fps "$fps" --out "$tmp/$v.mp4" >/dev/null
  got=$(ffprobe -v error -select_streams v:0 -count_frames \
    -show_entries stream=codec_name,width,height,nb_read_frames,r_frame_rate -of csv=p=0 "$tmp/$v.mp4")
  [ "$got" = "h264,${size%x*},${size#*x},$fps,$n" ] || fail "$v mp4: $got, expected h264 $size $fps $n frames"
  dec --model "$dir" --latents "$dir/inputs.safetensors" --out "$tmp/${v}_frames/" >/dev/null
  [ "$(ls "$tmp/${v}_frames" | grep -c '\.png$')" = "$n" ] || fail "$v: not $n PNG frames"
done
# bf16 (the video decoders), fixture mode: within the bf16 bars of tests/testing/video_vae_golden.h
# (3x the READMEs' bf16 spreads; the H3 ViT's is its own test's).
for g in vae-wan22-tiny:0.0936 vae-turbo-tiny:0.1419 vae-h3video-tiny:0.01341; do
  v=${g%%:*} bar=${g#*:}
  dir=$shared/golden/$v
  dec --model "$dir" --inputs "$dir/inputs.safetensors" --precision bf16 --out "$tmp/b.safetensors" \
    >/dev/null || fail "$v bf16"
  python3 "$lib/golden_close.py" "$tmp/b.safetensors" "$dir/outputs.safetensors" "$bar" video ||
    fail "$v bf16 vs golden"
done
bad "--precision bf16: Stable Audio Open .* decodes in fp32 only" "$W" --model "$SA" \
  --latents "$tmp/sa.safetensors" --precision bf16
bad "TurboVAED does not know MAGI-2's frame rate" "$tmp/t.mp4" --model "$shared/golden/vae-turbo-tiny" \
  --latents "$shared/golden/vae-turbo-tiny/inputs.safetensors"
bad "needs a video decoder" "$tmp/a.mp4" --model "$SA" --latents "$tmp/sa.safetensors"
bad "a WAV needs an audio decoder" "$tmp/v.wav" --model "$shared/golden/vae-wan22-tiny" \
  --latents "$shared/golden/vae-wan22-tiny/inputs.safetensors"
echo "decode_cli: ok"
