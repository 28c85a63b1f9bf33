#!/usr/bin/env bash
# `avdit tokenize`: ids of a few strings (H3 and MAGI-2 pipelines), the --json shape, every golden
# string through --strings against the goldens, prompt files, truncation with a warning, and the
# exit codes and one-line messages of bad input. Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$@"
G=$shared/golden/tokenizer-qwen

# Ids (values from the goldens: h3 prompt_formats.t2va, ascii/1 of both pipelines).
tok() { "$avdit" tokenize --tokenizer "$G" "$@"; }
[ "$(tok --text "a lovely cat")" = "64 16690 8251" ] || fail "a lovely cat"
[ "$(tok --text "Hello world")" = "9707 1879" ] || fail "h3 Hello world"
[ "$(tok --text "Hello world" --pipeline magi2)" = "39 4791 1879" ] ||
  fail "magi2 Hello world (CJK-split quirk)"
[ "$(tok --text "<d>hi</d>")" = "151669 6023 151670" ] || fail "h3 <d>"

# --json: ids, tokens, offsets and decode agree with each other and the text.
out=$(tok --text "Crème brûlée 🐱 <|im_start|>" --json)
python3 - "$out" <<'PY' || fail "--json shape: $out"
import json, sys
j = json.loads(sys.argv[1])
assert list(j) == ["ids", "tokens", "offsets", "decoded"], list(j)
assert len(j["ids"]) == len(j["tokens"]) == len(j["offsets"])
assert j["decoded"] == "Crème brûlée 🐱 <|im_start|>"
assert j["ids"][-1] == 151644 and j["offsets"][-1] == [15, 27], j
PY
out=$(tok --text "A cat" --json --pipeline magi2 --figure)
python3 - "$out" <<'PY' || fail "magi2 --figure: $out"
import json, sys
j = json.loads(sys.argv[1])
assert j["normalized"] == "A catreference_layer:The first frame refers to <Figure 1>", j
assert [j["tokens"][i] for i in j["figure_1_token_indices"]] == ["<", "F", "igure", "Ġ", "1", ">"], j
PY

# Every golden string, both pipelines, against the golden ids.
for pipeline in h3 magi2; do
  golden=h3_qwen3vl_tokens.json
  [ $pipeline = magi2 ] && golden=magi2_qwen35_standin_tokens.json
  tok --strings "$G/strings.json" --pipeline $pipeline >"$tmp/ids.json"
  python3 - "$tmp/ids.json" "$G/$golden" <<'PY' || fail "--strings $pipeline differs from $golden"
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["strings"]
assert len(got) == len(want) == 212, (len(got), len(want))
bad = [k for k in want if got.get(k) != want[k]["ids"]]
assert not bad, bad[:5]
PY
done

# A prompt file is stripped, as the references read it.
printf '  a lovely cat \n\n' >"$tmp/prompt.txt"
[ "$(tok --prompt-file "$tmp/prompt.txt")" = "64 16690 8251" ] || fail "prompt file not stripped"

# Beyond 7000 tokens MAGI-2 truncates: a warning, exit 0, 7000 ids.
python3 -c "import sys; sys.stdout.write('word ' * 8000)" >"$tmp/long.txt"
tok --prompt-file "$tmp/long.txt" --pipeline magi2 >"$tmp/out" 2>"$tmp/err" ||
  fail "long prompt gave exit $?"
[ "$(wc -w <"$tmp/out")" -eq 7000 ] || fail "long prompt: $(wc -w <"$tmp/out") ids, not 7000"
grep -q "8000 tokens: truncated to the first 7000" "$tmp/err" ||
  fail "no truncation warning: $(cat "$tmp/err")"

# Bad input: exit 2, one line naming the file / option / limit, nothing on stdout.
bad() {  # bad EXPECTED_TEXT ARGS...
  local want=$1 rc=0
  shift
  "$avdit" tokenize "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ $rc -eq 2 ] || fail "$* gave exit $rc, not 2"
  [ ! -s "$tmp/out" ] || fail "$* wrote to stdout: $(cat "$tmp/out")"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$*: error is not one line: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "$*: message lacks '$want': $(cat "$tmp/err")"
}
bad "--text is empty" --tokenizer "$G" --text ""
bad "--text is not valid UTF-8: byte 2" --tokenizer "$G" --text $'ab\xff'
printf ' \n\t ' >"$tmp/blank.txt"
bad "blank.txt is empty" --tokenizer "$G" --prompt-file "$tmp/blank.txt"
printf 'caf\xe9' >"$tmp/latin1.txt"
bad "latin1.txt is not valid UTF-8: byte 3" --tokenizer "$G" --prompt-file "$tmp/latin1.txt"
mkdir -p "$tmp/partial"
cp "$G/vocab.json" "$G/tokenizer_config.json" "$tmp/partial/"
bad "$tmp/partial/merges.txt is missing" --tokenizer "$tmp/partial" --text "x"
bad "does not exist" --tokenizer "$tmp/nope" --text "x"
printf '{"strings": [' >"$tmp/broken.json"
bad "broken.json is not valid JSON" --tokenizer "$G" --strings "$tmp/broken.json"
bad "give one of --text, --prompt-file or --strings" --tokenizer "$G"
bad "--figure" --tokenizer "$G" --text "x" --figure
bad "give one of --text, --prompt-file or --strings" --tokenizer "$G" --text "x" \
  --strings "$G/strings.json"
echo "1 passed, 0 failed"
