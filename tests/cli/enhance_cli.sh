#!/usr/bin/env bash
# `avdit enhance` against a local chat-completions server (tests/tools/chat_server.py) replaying
# scripted answers: a valid caption, thinking-only then valid, a <think> block before the JSON,
# truncated JSON (finish_reason "length"), HTTP 500 then success, HTTP 429 with Retry-After, a
# slow answer beyond the timeout, invalid JSON every time, a refused thinking switch, a refused
# request (401), the image-to-video task, and no server at all (with and without
# --enhance-optional). The server's record of every request shows what was sent and how often; the
# caption cache is checked by stopping the server. Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$@"
fixtures=$src/tests/fixtures/enhance
export XDG_CACHE_HOME=$tmp/xdg  # never the user's own cache
unset AVDIT_ENHANCE_API_KEY OPENAI_API_KEY http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy
export no_proxy=127.0.0.1
SECONDS=0

server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
trap 'stop_server; rm -rf "$tmp"' EXIT
# start_server SCENARIO_JSON: a fresh server and record; sets url.
start_server() {
  stop_server
  printf '%s' "$1" >"$tmp/scenario.json"
  cp "$fixtures"/*.json "$tmp/"
  rm -f "$tmp/port" "$tmp/requests.json"
  python3 "$src/tests/tools/chat_server.py" --scenario "$tmp/scenario.json" \
    --record "$tmp/requests.json" --port-file "$tmp/port" --lifetime 60 &
  server_pid=$!
  for _ in $(seq 200); do [ -s "$tmp/port" ] && break; sleep 0.02; done
  [ -s "$tmp/port" ] || fail "the chat server did not start"
  url=http://127.0.0.1:$(cat "$tmp/port")/v1
}
# Short timeouts and waits, so that every scenario takes at most a few seconds.
fast=(--enhance-backoff 0.05 --enhance-timeout 2 --enhance-connect-timeout 1 --enhance-max-time 10)
enh() { "$avdit" enhance --url "$url" --model test-model "${fast[@]}" "$@"; }
# requests PYTHON: runs the assertions with `reqs` (the server's record) and helpers.
requests() {
  python3 - "$tmp/requests.json" "$1" <<'PY' || fail "requests: $1"
import hashlib, json, os, sys
path, code = sys.argv[1], sys.argv[2]
reqs = json.load(open(path)) if os.path.exists(path) else []
sha = lambda s: hashlib.sha256(s.encode()).hexdigest()
def template_sha(req, prompt):
    """SHA-256 of the sent text with the prompt and the emptied variation seed put back."""
    text = req["body"]["messages"][0]["content"][0]["text"]
    head, sep, tail = text.partition("User input:\n" + prompt + "\n\nOptional variation seed:\n\n")
    assert sep, "the prompt is not where the template puts it"
    slots = "User input:\n{user_input_text}\n\nOptional variation seed:\n{variation_seed}\n"
    return sha(head + slots + tail)
schema_sha = lambda req: sha(json.dumps(req["body"]["response_format"]["json_schema"]["schema"],
                                        separators=(",", ":"), ensure_ascii=False))
exec(code)
PY
}
cache_files() { find "$1" -type f 2>/dev/null | wc -l; }
T2V_SHA=7a8dd341e81f108ce5aaa9821a542c50023d0fd1a91f37ad75a8dd4f2bc7bae2  # prompts/t2v.md @f68a0f9
I2V_SHA=54b50f653edc7d4e32b4ac00af20eb640b269d09d95b35e45699676ef24e57e1  # prompts/i2v.md @f68a0f9
T2V_SCHEMA_SHA=efeb4c176b79e9b88bafbcb3049a4dd0d2191d61ca1bc4318a000fd69d14162a
I2V_SCHEMA_SHA=7fcf7485c2e3d36f13baa7539412c676fff7bac435933cc5280f5bda812c741a
valid='{"caption_file": "t2v_caption.json", "answers": [{"content": "@CAPTION@"}]}'
prompt="a lighthouse at dusk"

# 1. A valid answer: the caption is the reference's Markdown of the JSON; the request is the
#    reference's (template and schema byte for byte) with thinking off, the model and the seed.
start_server "$valid"
enh --prompt "$prompt" --seed 46 --enhance-cache "$tmp/cache" >"$tmp/c1.md" 2>"$tmp/err" ||
  fail "valid answer: exit $?: $(cat "$tmp/err")"
cmp -s "$tmp/c1.md" "$fixtures/t2v_caption.md" || fail "caption differs from t2v_caption.md"
requests "
assert len(reqs) == 1, len(reqs)
r = reqs[0]; b = r['body']
assert r['path'] == '/v1/chat/completions', r['path']
assert b['model'] == 'test-model' and b['seed'] == 46 and b['max_tokens'] == 16384, b
assert b['chat_template_kwargs'] == {'enable_thinking': False}, b.get('chat_template_kwargs')
assert b['reasoning_effort'] == 'low'
assert 'temperature' not in b and 'top_p' not in b
assert [m['role'] for m in b['messages']] == ['user'] and len(b['messages'][0]['content']) == 1
assert template_sha(r, '$prompt') == '$T2V_SHA'
assert b['response_format']['json_schema']['name'] == 'T2VEnhanceResult'
assert b['response_format']['json_schema']['strict'] is True
assert schema_sha(r) == '$T2V_SCHEMA_SHA'
assert 'authorization' not in r['headers'] and 'expect' not in r['headers']
"
[ "$(cache_files "$tmp/cache")" -eq 1 ] || fail "expected one cache file: $(ls -a "$tmp/cache")"
echo "ok   valid caption, request fields, one cache entry"

# 2. The cache: with the server gone, the same call gives the same bytes (no request possible).
stop_server
enh --prompt "$prompt" --seed 46 --enhance-cache "$tmp/cache" >"$tmp/c2.md" 2>"$tmp/err" ||
  fail "cached call: exit $?: $(cat "$tmp/err")"
cmp -s "$tmp/c1.md" "$tmp/c2.md" || fail "the cached caption differs from the first"
enh --prompt "$prompt" --seed 46 --enhance-cache "$tmp/cache" --json >"$tmp/c2.json" 2>/dev/null
python3 - "$tmp/c2.json" "$tmp/c1.md" "$fixtures/t2v_caption.json" <<'PY' || fail "cached --json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["from_cache"] is True and j["enhanced"] is True and j["attempts"] == 0, j
assert j["caption"] == open(sys.argv[2], encoding="utf-8").read()
assert j["fields"] == json.load(open(sys.argv[3])), "parsed fields"
assert j["task"] == "t2v" and j["template"].startswith("magi2-t2v-") and j["seed"] == 46
assert j["cache_file"].endswith(".json"), j["cache_file"]
PY
# A different seed, model or thinking setting misses: each makes one request.
start_server "$valid"
enh --prompt "$prompt" --seed 47 --enhance-cache "$tmp/cache" >/dev/null 2>&1
"$avdit" enhance --url "$url" --model other-model "${fast[@]}" --prompt "$prompt" --seed 46 \
  --enhance-cache "$tmp/cache" >/dev/null 2>&1
enh --prompt "$prompt" --seed 46 --enhance-cache "$tmp/cache" --enhance-thinking >/dev/null 2>&1
requests "
assert [r['body']['seed'] for r in reqs] == [47, 46, 46], [r['body']['seed'] for r in reqs]
assert [r['body']['model'] for r in reqs] == ['test-model', 'other-model', 'test-model']
assert 'chat_template_kwargs' not in reqs[2]['body'] and 'reasoning_effort' not in reqs[2]['body']
"
# ... and a second call of each is a hit; --no-enhance-cache asks again.
enh --prompt "$prompt" --seed 47 --enhance-cache "$tmp/cache" >/dev/null 2>&1
enh --prompt "$prompt" --seed 46 --enhance-cache "$tmp/cache" --no-enhance-cache >/dev/null 2>&1 &&
  fail "--enhance-cache with --no-enhance-cache was accepted"
enh --prompt "$prompt" --seed 46 --no-enhance-cache >/dev/null 2>&1
requests "assert len(reqs) == 4, len(reqs)"
[ "$(cache_files "$tmp/cache")" -eq 4 ] || fail "expected 4 cache files: $(ls "$tmp/cache")"
[ "$(cache_files "$XDG_CACHE_HOME")" -eq 0 ] || fail "--no-enhance-cache wrote to the default cache"
# The default folder, and the API key: sent as a bearer token, never logged nor cached.
AVDIT_ENHANCE_API_KEY=sekrit-token-123 enh --prompt "$prompt" >/dev/null 2>"$tmp/err0"
AVDIT_ENHANCE_API_KEY=sekrit-token-123 "$avdit" -vv enhance --url "$url" --model test-model \
  "${fast[@]}" --prompt "$prompt" --seed 5 --no-enhance-cache >/dev/null 2>"$tmp/err"
requests "assert reqs[-1]['headers']['authorization'] == 'Bearer sekrit-token-123'"
ls "$XDG_CACHE_HOME"/avdit/captions/*.json >/dev/null || fail "no file in the default cache folder"
! grep -rq sekrit "$tmp/err" "$tmp/err0" "$XDG_CACHE_HOME" "$tmp/cache" || fail "the API key was logged/cached"
grep -q "attempt 1/4: POST" "$tmp/err" || fail "-vv does not log the request: $(cat "$tmp/err")"
echo "ok   cache hit without a server, misses on seed / model / thinking, default folder, API key"

# 3. Thinking that used up the budget (no content; then an unterminated <think>), then a caption:
#    three attempts, the seed moving on after each unusable answer.
start_server '{"caption_file": "t2v_caption.json", "answers": [
  {"content": null, "reasoning_content": "Let me think about the lighthouse...",
   "finish_reason": "length"},
  {"content": "<think>The user wants a lighthouse. First the sea, then", "finish_reason": "length"},
  {"content": "@CAPTION@"}]}'
enh --prompt "$prompt" --seed 46 --no-enhance-cache --json >"$tmp/out.json" 2>"$tmp/err"
python3 - "$tmp/out.json" "$fixtures/t2v_caption.md" <<'PY' || fail "thinking-only then valid"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["attempts"] == 3 and j["from_cache"] is False, j["attempt_log"]
assert [a["seed"] for a in j["attempt_log"]] == [46, 47, 48], j["attempt_log"]
assert "finish_reason \"length\"" in j["attempt_log"][0]["outcome"], j["attempt_log"][0]
assert "thinking may have used the budget" in j["attempt_log"][1]["outcome"], j["attempt_log"][1]
assert j["attempt_log"][2]["outcome"] == "caption"
assert j["caption"] == open(sys.argv[2], encoding="utf-8").read()
PY
grep -q "attempt 1/4 failed: the answer was cut at max_tokens 16384" "$tmp/err" ||
  fail "no warning for the cut answer: $(cat "$tmp/err")"
echo "ok   thinking-only answers retried"

# 4. A <think> block before the JSON, and a chat template that opened the block: stripped.
for content in '<think>\nThe user wants a lighthouse.\n</think>\n\n@CAPTION@' \
  'The user wants a lighthouse.\n</think>\n\n```json\n@CAPTION@\n```'; do
  start_server "{\"caption_file\": \"t2v_caption.json\",
                 \"answers\": [{\"content\": \"$content\"}]}"
  enh --prompt "$prompt" --no-enhance-cache >"$tmp/out.md" 2>"$tmp/err" ||
    fail "think block: exit $?: $(cat "$tmp/err")"
  cmp -s "$tmp/out.md" "$fixtures/t2v_caption.md" || fail "think block: caption differs"
  requests "assert len(reqs) == 1"
done
echo "ok   <think> blocks stripped"

# 5. Truncated JSON (finish_reason "length"), then a caption.
start_server '{"caption_file": "t2v_caption.json", "answers": [
  {"content": "{\"global_layer\": {\"context\": \"A single continuous shot on a roc",
   "finish_reason": "length"},
  {"content": "@CAPTION@"}]}'
enh --prompt "$prompt" --no-enhance-cache --json >"$tmp/out.json" 2>/dev/null
python3 -c "
import json, sys
j = json.load(open('$tmp/out.json'))
log = j['attempt_log']
assert j['attempts'] == 2 and 'finish_reason \"length\"' in log[0]['outcome'], log
assert j['enhanced'] and j['fields']['global_layer']['video_metadata']['duration'] == 10.0
" || fail "truncated JSON then valid"
echo "ok   truncated answer retried"

# 6. HTTP 500, then a caption: retried with the same seed (the server failed, not the sample).
start_server '{"caption_file": "t2v_caption.json", "answers": [
  {"status": 500, "message": "engine overloaded"}, {"content": "@CAPTION@"}]}'
enh --prompt "$prompt" --seed 9 --no-enhance-cache >"$tmp/out.md" 2>"$tmp/err" ||
  fail "500: exit $?"
cmp -s "$tmp/out.md" "$fixtures/t2v_caption.md" || fail "500 then valid: caption differs"
grep -q "attempt 1/4 failed: HTTP 500 (engine overloaded); retrying in 0.05 s" "$tmp/err" ||
  fail "500: warning $(cat "$tmp/err")"
requests "assert [r['body']['seed'] for r in reqs] == [9, 9], reqs"
echo "ok   HTTP 500 retried"

# 7. HTTP 429 with Retry-After: 1 is followed (the backoff alone would wait 0.05 s).
start_server '{"caption_file": "t2v_caption.json", "answers": [
  {"status": 429, "message": "rate limited", "headers": {"Retry-After": "1"}},
  {"content": "@CAPTION@"}]}'
enh --prompt "$prompt" --no-enhance-cache >/dev/null 2>"$tmp/err" || fail "429: exit $?"
requests "
assert len(reqs) == 2, len(reqs)
gap = reqs[1]['t'] - reqs[0]['t']
assert 0.95 <= gap < 3, f'{gap:.3f} s between the 429 and the retry'
print(f'     Retry-After 1: the retry came {gap:.3f} s after the 429')
"
echo "ok   HTTP 429 Retry-After followed"

# 8. An answer slower than --enhance-timeout: abandoned and retried.
start_server '{"caption_file": "t2v_caption.json",
               "answers": [{"delay": 4, "content": "@CAPTION@"}, {"content": "@CAPTION@"}]}'
t0=$(date +%s.%N)
"$avdit" enhance --url "$url" --model test-model --enhance-backoff 0.05 --enhance-timeout 0.5 \
  --prompt "$prompt" --no-enhance-cache --json >"$tmp/out.json" 2>"$tmp/err" ||
  fail "slow answer: exit $?: $(cat "$tmp/err")"
t1=$(date +%s.%N)
python3 -c "
import json
j = json.load(open('$tmp/out.json'))
log = j['attempt_log']
assert j['attempts'] == 2 and log[0]['outcome'] == 'no complete answer within 0.5 s', log
assert 0.45 <= log[0]['seconds'] < 1.5, log[0]
wall = $t1 - $t0
assert wall < 3, f'{wall:.2f} s: the slow answer was waited for'
print(f'     slow answer abandoned after {log[0][\"seconds\"]:.3f} s; whole call {wall:.2f} s')
" || fail "slow answer"
echo "ok   slow answer timed out and retried"

# 9. Invalid JSON every time: the bounded attempts, then one error line (exit 1), nothing cached.
bad() {  # bad EXIT EXPECTED_TEXT ARGS...: exit code, empty stdout, one line naming EXPECTED_TEXT
  local want_rc=$1 want=$2 rc=0
  shift 2
  "$avdit" -q enhance "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ $rc -eq "$want_rc" ] || fail "$* gave exit $rc, not $want_rc: $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] || fail "$* wrote to stdout: $(cat "$tmp/out")"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$*: error is not one line: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "$*: message lacks '$want': $(cat "$tmp/err")"
}
start_server '{"answers": [{"content": "{\"global_layer\": {\"context\": oops}}"}]}'
bad 1 "(model test-model) gave no usable caption in 3 attempt(s)" --url "$url" --model test-model \
  "${fast[@]}" --enhance-attempts 3 --prompt "$prompt" --seed 46 --enhance-cache "$tmp/cache9"
grep -qF "enhancer http://127.0.0.1:$(cat "$tmp/port")/v1/chat/completions" "$tmp/err" ||
  fail "the error does not name the endpoint: $(cat "$tmp/err")"
grep -qF "the last: the caption is not valid JSON" "$tmp/err" ||
  fail "no last reason: $(cat "$tmp/err")"
requests "assert [r['body']['seed'] for r in reqs] == [46, 47, 48], reqs"
[ "$(cache_files "$tmp/cache9")" -eq 0 ] || fail "a failed call left a cache file"
# The time budget bounds the attempts too.
start_server '{"answers": [{"status": 503, "message": "loading"}]}'
bad 1 "would pass --enhance-max-time" --url "$url" --model test-model --enhance-backoff 0.4 \
  --enhance-attempts 10 --enhance-max-time 1 --prompt "$prompt" --no-enhance-cache
requests "assert 2 <= len(reqs) <= 3, len(reqs)"
echo "ok   invalid JSON: bounded attempts, then one error line"

# 10. A server that rejects a thinking switch gets the request again without it.
start_server '{"caption_file": "t2v_caption.json", "answers": [
  {"status": 400, "message": "Unrecognized request argument supplied: chat_template_kwargs"},
  {"content": "@CAPTION@"}]}'
enh --prompt "$prompt" --no-enhance-cache >"$tmp/out.md" 2>"$tmp/err" || fail "400 field: exit $?"
cmp -s "$tmp/out.md" "$fixtures/t2v_caption.md" || fail "400 field: caption differs"
requests "
assert 'chat_template_kwargs' in reqs[0]['body'] and 'chat_template_kwargs' not in reqs[1]['body']
assert reqs[1]['body']['reasoning_effort'] == 'low'
"
# A refused request (401) is not retried: exit 2 and what to do.
start_server '{"answers": [{"status": 401, "message": "Incorrect API key provided"}]}'
bad 2 "HTTP 401 (Incorrect API key provided); set the API key in OPENAI_API_KEY" --url "$url" \
  --model test-model "${fast[@]}" --prompt "$prompt" --no-enhance-cache
requests "assert len(reqs) == 1"
echo "ok   refused thinking switch dropped; 401 not retried"

# 11. Image-to-video: the i2v template and schema, the image as a data URL.
start_server '{"caption_file": "i2v_caption.json", "answers": [{"content": "@CAPTION@"}]}'
printf '\x89PNG\r\n\x1a\nnot really a png' >"$tmp/frame.png"
enh --prompt "the cat blinks" --image "$tmp/frame.png" --no-enhance-cache >"$tmp/out.md" ||
  fail "i2v: exit $?"
cmp -s "$tmp/out.md" "$fixtures/i2v_caption.md" || fail "i2v: caption differs from i2v_caption.md"
requests "
import base64
b = reqs[0]['body']; parts = b['messages'][0]['content']
assert template_sha(reqs[0], 'the cat blinks') == '$I2V_SHA'
assert b['response_format']['json_schema']['name'] == 'I2VEnhanceResult'
assert schema_sha(reqs[0]) == '$I2V_SCHEMA_SHA'
assert parts[1]['type'] == 'image_url'
url = parts[1]['image_url']['url']
assert url.startswith('data:image/png;base64,'), url[:40]
assert base64.b64decode(url.split(',', 1)[1]) == open('$tmp/frame.png', 'rb').read()
"
echo "ok   image-to-video request"

# 12. No server: exit 2 naming the URL; --enhance-optional warns and goes on with the raw prompt.
stop_server
# A port that nothing listens on: bound by the kernel's choice, then released.
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0))
print(s.getsockname()[1]); s.close()")
url=http://127.0.0.1:$port/v1
bad 2 "enhancer endpoint http://127.0.0.1:$port/v1/chat/completions is unreachable" --url "$url" \
  --model test-model "${fast[@]}" --prompt "$prompt" --no-enhance-cache
grep -qF "or pass --enhance-optional" "$tmp/err" || fail "no hint at --enhance-optional"
enh --prompt "$prompt" --no-enhance-cache --enhance-optional >"$tmp/out" 2>"$tmp/err" ||
  fail "--enhance-optional: exit $?"
[ "$(cat "$tmp/out")" = "$prompt" ] || fail "--enhance-optional: stdout is not the raw prompt"
grep -q "warning: enhancer endpoint .* is unreachable.*continuing with the raw prompt" "$tmp/err" ||
  fail "--enhance-optional: no warning: $(cat "$tmp/err")"
enh --prompt "$prompt" --no-enhance-cache --enhance-optional --json 2>/dev/null |
  python3 -c "
import json, sys
j = json.load(sys.stdin)
assert j['enhanced'] is False and j['caption'] == '$prompt' and j['fields'] is None, j
assert 'unreachable' in j['failure'] and j['attempts'] == 1, j
" || fail "--enhance-optional --json"
echo "ok   unreachable endpoint: exit 2, or the raw prompt with --enhance-optional"

# 13. Bad usage: exit 2, one line.
url=http://127.0.0.1:$port/v1
bad 2 "--prompt is empty" --url "$url" --model m --prompt ""
bad 2 "give one of --prompt or --prompt-file" --url "$url" --model m
bad 2 "--url 'ftp://h/v1' is not an http:// or https:// URL" --url ftp://h/v1 --model m --prompt x
bad 2 "cannot read the image" --url "$url" --model m --prompt x --image "$tmp/none.png"
bad 2 "--enhance-attempts is 0" --url "$url" --model m --prompt x --enhance-attempts 0
bad 2 "--prompt is not valid UTF-8" --url "$url" --model m --prompt $'caf\xe9'
echo "ok   bad usage"
echo "all scenarios in ${SECONDS} s"
echo "1 passed, 0 failed"
