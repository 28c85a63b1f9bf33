#!/usr/bin/env bash
# The attention sparsity probe's cost at H3's full width (issue 38): a random H3 of the release's
# widths with LAYERS blocks written by `avdit init`, random text states, then `avdit probe attention`
# timed on DEVICE. Run from a build's source root with A the built avdit; writes probe.json and
# probe.png to OUT (PNG=0: no picture, for builds without libpng). Environment (defaults: the H200 run):
#   CONFIG  an H3 transformer config.json (the release's)    LAYERS  blocks kept (4)
#   LATENT  T,H,W,A (18,48,84,126: 69 frames at 768x1344)    TEXT    text tokens (512)
#   DEVICE  cuda or cpu                                       ARGS    more probe options
set -euo pipefail
A=${A:?set A to the built avdit}
OUT=${OUT:-/tmp/probe-full}
CONFIG=${CONFIG:-${AVDIT_SHARED_DIR:-../shared}/reference-configs/h3/FL2VA/transformer/config.json}
LAYERS=${LAYERS:-4}
LATENT=${LATENT:-18,48,84,126}
TEXT=${TEXT:-512}
DEVICE=${DEVICE:-cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$OUT"
python3 - "$CONFIG" "$LAYERS" "$TEXT" "$work" <<'PY'
import json, random, struct, sys
cfg, layers, tokens, work = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
cfg["num_layers"] = layers
json.dump(cfg, open(f"{work}/config.json", "w"), indent=2)
# text_embeds [tokens, text_dim] F32, N(0, 1), as `generate --text` reads them.
n = tokens * cfg["text_dim"]
rng = random.Random(5)
data = struct.pack(f"<{n}f", *(rng.gauss(0.0, 1.0) for _ in range(n)))
head = json.dumps({"text_embeds": {"dtype": "F32", "shape": [tokens, cfg["text_dim"]],
                                   "data_offsets": [0, len(data)]}}).encode()
head += b" " * (-len(head) % 8)
with open(f"{work}/text.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(head)) + head + data)
PY
t0=$SECONDS
"$A" -q init --family h3 --config "$work/config.json" --out "$work/h3"
echo "init: $LAYERS blocks of $(basename "$CONFIG")'s widths written in $((SECONDS - t0)) s"
t1=$SECONDS
png=()
if [ "${PNG:-1}" != 0 ]; then png=(--png "$OUT/probe.png"); fi
# shellcheck disable=SC2086
"$A" probe attention --model "$work/h3" --text "$work/text.safetensors" --latent-shape "$LATENT" \
  --steps 2 --probe-steps 1 --queries-every 16 --bar 0.7 --device "$DEVICE" --precision bf16 \
  --out "$OUT/probe.json" ${png[@]+"${png[@]}"} ${ARGS:-}
echo "probe: $((SECONDS - t1)) s wall on $DEVICE ($LAYERS blocks, latent $LATENT, every 16th video query)"
