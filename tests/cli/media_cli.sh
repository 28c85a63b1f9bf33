#!/usr/bin/env bash
# The media writers (src/io/media) through tests/tools/media_tool, read back by independent
# implementations: ffprobe / ffmpeg for the mp4 (streams, frame count and rate, size, durations,
# decoded pixels and tones) and for PNG pixels, a RIFF parser and Python's wave module for WAV
# (lib/media_check.py). Bad input exits 2 with one line, a full disk exits 1, and neither leaves
# a file behind. Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$@"
tool=$(dirname "$avdit")/media_tool
[ -x "$tool" ] || fail "$tool is missing (it is built with the tests)"
command -v ffprobe >/dev/null && command -v ffmpeg >/dev/null ||
  fail "ffprobe / ffmpeg missing: run scripts/setup.sh (Debian package ffmpeg)"
check() { "$py" "$src/tests/cli/lib/media_check.py" "$@" || fail "media_check.py $1 $2"; }
ok() { echo "ok   $*"; }

# mp4: odd size (padded to even), NTSC rate, stereo 44.1 kHz at the default CRF 18.
"$tool" mp4 "$tmp/ntsc.mp4" --frames 30 --size 75x43 --fps 30000/1001 --rate 44100 --dump "$tmp/ntsc.st"
check mp4 "$tmp/ntsc.mp4" --frames 30 --width 75 --height 43 --fps 30000/1001 --rate 44100
# 30 frames at 30000/1001 fps last 1.001 s: 44144.1 samples, rounded to 44144.
check audio "$tmp/ntsc.mp4" "$tmp/ntsc.st" --fps 30000/1001 --samples 44144 --min-snr 20
ok "mp4 75x43 at 30000/1001 fps, stereo 44.1 kHz"

# Mono at 48 kHz, 25 fps, the waveform longer than the video (cut at 0.96 s = 46080 samples).
"$tool" mp4 "$tmp/mono.mp4" --frames 24 --size 64x36 --fps 25 --channels 1 --rate 48000 \
  --audio-seconds 2 --dump "$tmp/mono.st"
check mp4 "$tmp/mono.mp4" --frames 24 --width 64 --height 36 --fps 25 --rate 48000
check audio "$tmp/mono.mp4" "$tmp/mono.st" --fps 25 --samples 46080 --min-snr 20
ok "mp4 mono 48 kHz duplicated to stereo, audio cut to the video"

# 24 fps at 32 kHz, the waveform shorter than the video: padded with silence after 0.5 s.
"$tool" mp4 "$tmp/short.mp4" --frames 48 --size 48x32 --fps 24 --rate 32000 --audio-seconds 0.5 \
  --dump "$tmp/short.st"
check mp4 "$tmp/short.mp4" --frames 48 --width 48 --height 32 --fps 24 --rate 32000
check audio "$tmp/short.mp4" "$tmp/short.st" --fps 24 --samples 64000 --min-snr 20 --silent-tail 17000
ok "mp4 32 kHz, audio padded with silence to the video"

"$tool" mp4 "$tmp/silent.mp4" --frames 5 --size 33x17 --fps 12 --no-audio --preset ultrafast
check mp4 "$tmp/silent.mp4" --frames 5 --width 33 --height 17 --fps 12 --rate 0
ok "mp4 without audio"

# Pixels: every decoded frame against the input at a high-quality CRF. The tolerance covers the
# 8-bit BT.709 YCbCr round trip and 4:2:0 chroma on these saturated moving gradients (mean |err|
# about 0.5, max about 6 measured); a BT.601 decode of the same clip is off by mean 7, max 39.
"$tool" mp4 "$tmp/hq.mp4" --frames 12 --size 161x91 --fps 24 --crf 4 --no-audio --dump "$tmp/hq.st"
check pixels "$tmp/hq.mp4" "$tmp/hq.st" --crf 4 --tol-mean 1.0 --tol-max 12
ok "mp4 decoded pixels at CRF 4"

# WAV: float32 bit-exact (three channels too), pcm16 within 1 LSB (Python's wave module).
"$tool" wav "$tmp/f.wav" --channels 3 --rate 48000 --dump "$tmp/f.st"
check wav "$tmp/f.wav" "$tmp/f.st" --format float32 --rate 48000
"$tool" wav "$tmp/s.wav" --channels 2 --rate 44100 --format pcm16 --dump "$tmp/s.st"
check wav "$tmp/s.wav" "$tmp/s.st" --format pcm16 --rate 44100
ok "wav float32 and pcm16"

# PNG: one frame, a frame folder and a contact sheet, every pixel exact (ffmpeg's PNG decoder).
"$tool" png "$tmp/one.png" --size 37x23 --dump "$tmp/one.st"
check png "$tmp/one.png" "$tmp/one.st"
mkdir "$tmp/empty"  # an existing empty folder is accepted and filled
"$tool" frames "$tmp/empty" --frames 11 --size 20x14 --dump "$tmp/frames.st"
check frames "$tmp/empty" "$tmp/frames.st"
"$tool" sheet "$tmp/sheet.png" --runs 3 --frames 20 --size 40x30 --labels "seed 1,seed 2,größer" \
  --dump "$tmp/sheet.st"
check sheet "$tmp/sheet.png" "$tmp/sheet.st" --labels "seed 1,seed 2,größer"
ok "png frame, frame folder, contact sheet"

# Bad input: exit 2, one line on stderr naming the problem, nothing left in the folder.
mkdir "$tmp/bad" && touch "$tmp/bad/a-file"
expect() {  # expect RC PATTERN TOOL_ARGS...
  local want=$1 pattern=$2
  shift 2
  local rc=0
  "$tool" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt" || rc=$?
  [ "$rc" = "$want" ] || fail "media_tool $*: exit $rc, expected $want: $(cat "$tmp/err.txt")"
  [ "$(wc -l <"$tmp/err.txt")" = 1 ] || fail "media_tool $*: not one line: $(cat "$tmp/err.txt")"
  grep -q -- "$pattern" "$tmp/err.txt" || fail "media_tool $*: '$(cat "$tmp/err.txt")' lacks '$pattern'"
  [ "$(ls -A "$tmp/bad")" = a-file ] || fail "media_tool $*: left $(ls -A "$tmp/bad")"
  ok "exit $rc: $(cat "$tmp/err.txt")"
}
B=$tmp/bad
expect 2 "tensor 'frames' is \[72, 48, 64\]; expected frames \[T, 3, H, W\]" mp4 "$B/x.mp4" --rank3
expect 2 "tensor 'frames' \[24, 3, 48, 64\] holds a non-finite value (nan) at frame 12" \
  mp4 "$B/x.mp4" --nan frames
expect 2 "tensor 'audio' \[2, 44100\] holds a non-finite value" mp4 "$B/x.mp4" --nan audio
expect 2 "tensor 'audio' is \[3, 44100\]: 3 channels, this format takes 1 to 2" \
  mp4 "$B/x.mp4" --channels 3
expect 2 "sample rate 44101 Hz: AAC in mp4 takes only" mp4 "$B/x.mp4" --rate 44101
expect 2 "the folder $B/missing does not exist" mp4 "$B/missing/x.mp4"
expect 2 "cannot create a file in $B/a-file: Not a directory" mp4 "$B/a-file/x.mp4"
expect 2 "is a folder; give a file name" mp4 "$B"
expect 2 "crf 60 is out of range" mp4 "$B/x.mp4" --crf 60
expect 2 "preset 'quick' is not an x264 preset" mp4 "$B/x.mp4" --preset quick
expect 2 "tensor 'audio' \[2, 44100\] holds a non-finite value" wav "$B/x.wav" --nan audio
expect 2 "tensor 'frame' \[3, 48, 64\] holds a non-finite value" png "$B/x.png" --nan frames
expect 2 "tensor 'frames' is \[72, 48, 64\]" frames "$B/frames" --rank3
# NaN in frame 12: twelve frames are already written into the temporary folder by then.
expect 2 "tensor 'frames' \[24, 3, 48, 64\] holds a non-finite value (nan) at frame 12" \
  frames "$B/frames" --nan frames
expect 2 "$tmp/empty: the folder exists and is not empty" frames "$tmp/empty"
expect 2 "2 labels for 3 runs" sheet "$B/x.png" --labels a,b
expect 2 "tensor 'runs\[0\]' .* holds a non-finite value" sheet "$B/x.png" --nan frames

# A full disk, simulated by a file-size limit (EFBIG, with SIGXFSZ ignored): exit 1, nothing left.
full() {  # full KIB PATTERN TOOL_ARGS...
  local kib=$1
  shift
  (
    ulimit -f "$kib"
    trap '' XFSZ
    expect 1 "$@"
  ) || exit 1
}
full 16 "$B/x.mp4: writing failed: File too large; nothing was written" mp4 "$B/x.mp4" --size 320x240
full 16 "$B/x.wav: writing failed: File too large" wav "$B/x.wav" --seconds 2
full 8 "$B/x.png: writing failed: File too large" png "$B/x.png" --size 1280x720
full 8 "$B/frames/frame_00000.png: writing failed: File too large" frames "$B/frames" --frames 2 \
  --size 1280x720
full 8 "$B/x.png: writing failed: File too large" sheet "$B/x.png" --size 640x480
echo "all media checks passed"
