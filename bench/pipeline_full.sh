#!/usr/bin/env bash
# Full-width random pipelines on one GPU, prompt -> mp4 (issue 33's memory table and cold start;
# issue 38's step-cache speedup): `avdit init --size full --configs-only`, then `avdit generate
# --random-weights` with the release's default settings, each run's stage table (wall time, peak
# host and GPU memory) and SHA-256 lines kept. Run from a build's source root with A the built avdit.
#   CASES  words of FAMILY:NAME:STEPS[:ARGS with commas for spaces], run in order with one cache
#          (so the second run of a prompt is warm), e.g. "h3:cold:2 h3:warm:2 magi2:cold:2:--no-refine"
#   RUN_S  timeout of one run (default 240); SIZE full (default) or tiny, DEVICE cuda (default) or cpu
#   CLIP   mp4 (default) or safetensors (frames + waveform: a build without FFmpeg, as on the device)
# Prints each run's output (stage table or --json) to stdout. The clips stay in /tmp (a
# random-weight clip is noise, megabytes per second); their sizes and SHA-256 are printed.
set -uo pipefail
A=${A:?set A to the built avdit}
export XDG_CACHE_HOME=/tmp/pipeline-full-cache  # a cold start for the first run
rm -rf "$XDG_CACHE_HOME"
P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air."
t0=$SECONDS
for c in ${CASES:?}; do
  IFS=: read -r fam name steps args <<<"$c"
  [ -d "/tmp/$fam-full" ] || "$A" -q init --pipeline "$fam" --size "${SIZE:-full}" --configs-only --out "/tmp/$fam-full"
  extra=()
  [ "$fam" = magi2 ] && extra=(--nvfp4-experts)
  [ -n "$args" ] && IFS=, read -r -a more <<<"$args" && extra+=("${more[@]}")
  log="/tmp/$fam-$name.txt"
  echo "## $fam $name: generate --random-weights --steps $steps ${extra[*]} ($((SECONDS - t0)) s)"
  timeout "${RUN_S:-240}" "$A" generate --model "/tmp/$fam-full" --random-weights --prompt "$P" \
    --steps "$steps" --device "${DEVICE:-cuda}" --precision bf16 "${extra[@]}" --out "/tmp/$fam-$name.${CLIP:-mp4}" \
    >"$log" 2>&1
  echo "exit $? ($((SECONDS - t0)) s)"
  grep -v "it/s\|s/it" "$log"
  clip="/tmp/$fam-$name.${CLIP:-mp4}"
  [ -f "$clip" ] && echo "clip: $(stat -c %s "$clip") bytes, sha256 $(sha256sum "$clip" | cut -c1-64)"
done
