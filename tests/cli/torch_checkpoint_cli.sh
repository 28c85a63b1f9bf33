#!/usr/bin/env bash
# The MAGI-2 release's VAE folders as they ship, PyTorch checkpoints read unchanged: vae/ with
# Wan2.2_VAE.pth alone (no config.json; the decoder's and the encoder's 196 tensors of the two
# goldens in one state dict) and turbo_vae/ with TurboV3-Wan22-TinyShallow_7_7.json beside
# checkpoint.ckpt (ema_state_dict with 'module.' names, a decoy state_dict, a step and a learning
# rate). tests/tools/write_torch_checkpoint.py writes them in torch.save's layout (no torch here).
# `avdit decode` must recognise both folders and give the same bytes as from the goldens'
# safetensors; a truncated checkpoint and one whose pickle holds an unknown opcode exit 2 with one
# line naming the file and leave no output. Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$1" "$2"
src_dir=$3
lib=$(dirname "${BASH_SOURCE[0]}")/lib
writer=$src_dir/tests/tools/write_torch_checkpoint.py
G=$shared/golden

mkdir -p "$tmp/vae" "$tmp/turbo_vae"
python3 "$writer" "$tmp/vae/Wan2.2_VAE.pth" "$G/vae-wan22-tiny/model.safetensors" \
  "$G/vae-wan22enc-tiny/model.safetensors"
python3 "$writer" "$tmp/turbo_vae/checkpoint.ckpt" "$G/vae-turbo-tiny/model.safetensors" \
  --wrap ema_state_dict --module-prefix --decoy-state-dict
python3 - "$G/vae-turbo-tiny/config.json" "$tmp/turbo_vae/TurboV3-Wan22-TinyShallow_7_7.json" <<'PY'
import json, sys
json.dump(json.load(open(sys.argv[1]))["config"], open(sys.argv[2], "w"), indent=2)
PY

for pair in "vae:vae-wan22-tiny" "turbo_vae:vae-turbo-tiny"; do
  folder=$tmp/${pair%%:*} golden=$G/${pair#*:}
  "$avdit" -q decode --model "$folder" --inputs "$golden/inputs.safetensors" --out "$tmp/pth.safetensors" \
    >"$tmp/pth.txt" || fail "$folder: $(cat "$tmp/pth.txt")"
  "$avdit" -q decode --model "$golden" --inputs "$golden/inputs.safetensors" --out "$tmp/st.safetensors" \
    >/dev/null
  cmp -s "$tmp/pth.safetensors" "$tmp/st.safetensors" ||
    fail "$folder: the decode from the PyTorch checkpoint differs from the safetensors one"
  python3 "$lib/golden_close.py" "$tmp/pth.safetensors" "$golden/outputs.safetensors" 1e-4 video ||
    fail "$folder vs golden"
done

# Bad checkpoints: exit 2, one line naming the file, no output.
bad() {  # bad EXPECTED_REGEX FOLDER
  local want=$1 folder=$2 rc=0
  rm -f "$tmp/o.safetensors"
  "$avdit" decode --model "$folder" --inputs "$G/vae-wan22-tiny/inputs.safetensors" \
    --out "$tmp/o.safetensors" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ $rc -eq 2 ] || fail "$folder: exit $rc, not 2: $(cat "$tmp/err")"
  [ ! -e "$tmp/o.safetensors" ] || fail "$folder: wrote an output"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$folder: error is not one line: $(cat "$tmp/err")"
  grep -qE -- "$want" "$tmp/err" || fail "$folder: message lacks '$want': $(cat "$tmp/err")"
}
mkdir -p "$tmp/cut" "$tmp/opcode"
head -c 100000 "$tmp/vae/Wan2.2_VAE.pth" >"$tmp/cut/Wan2.2_VAE.pth"
bad "cut/Wan2.2_VAE.pth: not a zip archive .*truncated" "$tmp/cut"
cp "$src_dir/tests/fixtures/torch/unknown_opcode.pth" "$tmp/opcode/Wan2.2_VAE.pth"
bad "opcode/Wan2.2_VAE.pth: data.pkl byte 3: pickle opcode 0x69" "$tmp/opcode"
echo "torch_checkpoint_cli: ok"
