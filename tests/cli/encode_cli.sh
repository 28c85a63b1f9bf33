#!/usr/bin/env bash
# `avdit encode`: fixture mode on the te-h3-qwen3vl-tiny golden (every case within the README's
# fp32 bar, the same bytes on a second run), prompt mode (what `avdit generate --text` reads,
# accepted by it), and the exit code 2, one-line message and absent output of bad input.
# Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$1" "$2"
export XDG_CACHE_HOME=$tmp/xdg  # the prompt-state cache, never the user's own
G=$shared/golden/te-h3-qwen3vl-tiny
T=$shared/golden/tokenizer-qwen

enc() { "$avdit" -q encode --model "$G" --layers 4 "$@"; }
sha_of() { grep "^$1 " "$2" | sed 's/.*sha256 //'; }

# Fixture mode: two runs, the same SHA-256 per case; values within 2e-5 of max |ref| (README).
enc --inputs "$G/inputs.safetensors" --out "$tmp/a.safetensors" >"$tmp/a.txt"
enc --inputs "$G/inputs.safetensors" --out "$tmp/b.safetensors" >"$tmp/b.txt"
for c in 0 1 2 3 4 5; do
  s=$(sha_of "case$c.text_states" "$tmp/a.txt")
  [ -n "$s" ] || fail "no sha256 printed for case$c: $(cat "$tmp/a.txt")"
  [ "$s" = "$(sha_of "case$c.text_states" "$tmp/b.txt")" ] || fail "case$c differs between runs"
done
cmp -s "$tmp/a.safetensors" "$tmp/b.safetensors" || fail "the two fixture outputs differ"
# check_fixture OUT GOLDEN_OUTPUTS CASES BAR: every case{i}.text_states within BAR of max |ref|.
check_fixture() {
  local names=() c
  for ((c = 0; c < $3; c++)); do names+=("case$c.text_states"); done
  python3 "$(dirname "${BASH_SOURCE[0]}")/lib/golden_close.py" "$1" "$2" "$4" "${names[@]}"
}
check_fixture "$tmp/a.safetensors" "$G/outputs.safetensors" 6 2e-5 || fail "fixture mode vs golden"

# Prompt mode: text_embeds (bf16) and text_token_tags, printed with their SHA-256, stable across
# runs; every id of this prompt lies inside the tiny fixture's 2048-token vocabulary.
P="This is a test of the"
enc --tokenizer "$T" --prompt "$P" --out "$tmp/p1.safetensors" >"$tmp/p1.txt"
enc --tokenizer "$T" --prompt "$P" --out "$tmp/p2.safetensors" >"$tmp/p2.txt"
grep -q "^text_embeds \[6, 64\] BF16  sha256 [0-9a-f]\{64\}$" "$tmp/p1.txt" ||
  fail "prompt mode output: $(cat "$tmp/p1.txt")"
grep -q "^text_token_tags \[6\] I64  sha256 " "$tmp/p1.txt" || fail "no tags: $(cat "$tmp/p1.txt")"
[ "$(sha_of text_embeds "$tmp/p1.txt")" = "$(sha_of text_embeds "$tmp/p2.txt")" ] ||
  fail "prompt mode differs between runs"
# The second call read the prompt-state cache (the one generate --prompt shares); --no-cache
# encodes again; all three give the same bits, the files too.
grep -q "^prompt-state cache hit: $tmp/xdg/avdit/prompts/[0-9a-f]\{64\}.safetensors$" "$tmp/p2.txt" ||
  fail "no cache hit: $(cat "$tmp/p2.txt")"
enc --tokenizer "$T" --prompt "$P" --no-cache --out "$tmp/p3.safetensors" >"$tmp/p3.txt"
grep -q "tokens in" "$tmp/p3.txt" || fail "--no-cache did not encode: $(cat "$tmp/p3.txt")"
[ "$(sha_of text_embeds "$tmp/p1.txt")" = "$(sha_of text_embeds "$tmp/p3.txt")" ] ||
  fail "the cached states differ from the encoded ones"
cmp -s "$tmp/p1.safetensors" "$tmp/p3.safetensors" || fail "cached and encoded files differ"
# `avdit generate --text` reads it (the H3 tiny DiT's text_dim is 64 too).
"$avdit" -q generate --model "$shared/golden/h3-tiny" --text "$tmp/p1.safetensors" \
  --latent-shape 2,4,6,12 --steps 1 >"$tmp/gen.txt" || fail "generate does not read the output"

# MAGI-2's encoder (model_type qwen3_5, te-magi2-qwen35-tiny): fixture mode within that README's
# 1e-4 bar; prompt mode with a negative prompt writes txt_feat and null_txt_feat padded to one
# length, which `avdit generate --text F --negative F` reads (the MAGI-2 tiny DiT's text width is 64).
M=$shared/golden/te-magi2-qwen35-tiny
"$avdit" -q encode --model "$M" --inputs "$M/inputs.safetensors" --out "$tmp/m.safetensors" \
  >"$tmp/m.txt" || fail "MAGI-2 fixture mode: $(cat "$tmp/m.txt")"
check_fixture "$tmp/m.safetensors" "$M/outputs.safetensors" 6 1e-4 || fail "MAGI-2 fixture vs golden"
# (ids 64 1273 315 279 1899 and 1782 under MAGI-2's pre-tokeniser: inside the 2048-token vocabulary)
"$avdit" -q encode --model "$M" --tokenizer "$T" --prompt "a test of the day" --negative "the" \
  --out "$tmp/mp.safetensors" >"$tmp/mp.txt" || fail "MAGI-2 prompt mode: $(cat "$tmp/mp.txt")"
grep -q "^txt_feat \[1, 5, 64\] BF16  sha256 " "$tmp/mp.txt" || fail "txt_feat: $(cat "$tmp/mp.txt")"
grep -q "^null_txt_feat \[1, 5, 64\] BF16  sha256 " "$tmp/mp.txt" ||
  fail "null_txt_feat not padded to the prompt's 5 rows: $(cat "$tmp/mp.txt")"
grep -q "^null_txt_len \[1\] I64" "$tmp/mp.txt" || fail "no null_txt_len: $(cat "$tmp/mp.txt")"
"$avdit" -q generate --model "$shared/golden/magi2-tiny" --text "$tmp/mp.safetensors" \
  --negative "$tmp/mp.safetensors" --steps 1 --latent-shape 2,4,6,64 --out "$tmp/mgen.safetensors" \
  >"$tmp/mgen.txt" 2>&1 ||
  fail "generate does not read the MAGI-2 output: $(cat "$tmp/mgen.txt")"

# Bad input: exit 2, one line naming what is wrong, no output file, nothing on stdout.
bad() {  # bad EXPECTED_TEXT ARGS...
  local want=$1 rc=0
  shift
  rm -f "$tmp/bad.safetensors"
  "$avdit" encode "$@" --out "$tmp/bad.safetensors" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ $rc -eq 2 ] || fail "$* gave exit $rc, not 2: $(cat "$tmp/err")"
  [ ! -e "$tmp/bad.safetensors" ] || fail "$*: wrote an output"
  [ -z "$(ls -A "$tmp" | grep '\.tmp$' || true)" ] || fail "$*: left a temporary file"
  [ ! -s "$tmp/out" ] || fail "$* wrote to stdout: $(cat "$tmp/out")"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$*: error is not one line: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "$*: message lacks '$want': $(cat "$tmp/err")"
}
bad "--prompt is empty" --model "$G" --layers 4 --tokenizer "$T" --prompt ""
bad "--prompt is not valid UTF-8" --model "$G" --layers 4 --tokenizer "$T" --prompt $'ab\xff'
bad "--inputs $tmp/none.safetensors: no such file" --model "$G" --layers 4 \
  --inputs "$tmp/none.safetensors"
bad "does not exist" --model "$G" --layers 4 --tokenizer "$tmp/nope" --prompt "x"
bad "$tmp/none: " --model "$tmp/none" --layers 4 --inputs "$G/inputs.safetensors"
bad "num_hidden_layers" --model "$G" --inputs "$G/inputs.safetensors"  # the default 50 of 6
bad "outside the vocabulary" --model "$G" --layers 4 --tokenizer "$T" --prompt "a lovely cat"
bad "give --prompt TEXT or --inputs" --model "$G" --layers 4
bad "MiniMax-H3 is CFG-distilled" --model "$G" --layers 4 --tokenizer "$T" --prompt "$P" --negative "x"
# A checkpoint without a layer the run needs: the tensor named; without unused layers: it runs.
mkdir -p "$tmp/cut"
cp "$G/config.json" "$tmp/cut/"
python3 - "$G/model.safetensors" "$tmp/cut/model.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data, out, pos = b[8 + n:], {}, 0
chunks = []
for k, v in h.items():  # drop layer 3's up_proj and every layer from 4 on
    if k == "__metadata__": continue
    if k == "model.language_model.layers.3.mlp.up_proj.weight": continue
    if k.startswith("model.language_model.layers.") and int(k.split(".")[3]) >= 4: continue
    s, e = v["data_offsets"]
    chunks.append(data[s:e])
    out[k] = dict(v, data_offsets=[pos, pos + e - s])
    pos += e - s
hdr = json.dumps(out).encode()
hdr += b" " * (-len(hdr) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hdr)) + hdr + b"".join(chunks))
PY
bad "layers.3.mlp.up_proj.weight" --model "$tmp/cut" --layers 4 --inputs "$G/inputs.safetensors"
"$avdit" -q encode --model "$tmp/cut" --layers 3 --inputs "$G/inputs.safetensors" \
  --out "$tmp/cut.safetensors" >/dev/null || fail "3 layers of a checkpoint cut after layer 3"
echo "encode_cli: ok"
