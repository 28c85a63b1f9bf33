#!/usr/bin/env bash
# Issue 30 end to end: each class of hostile input (overflowing shapes, deep JSON, FIFOs, huge
# configs, shard traversal, NaN/Inf inputs and options, out = in, unwritable or missing folders,
# out naming a folder, concurrent writers, planted temp symlinks, a kill while publishing) exits 2
# with one line naming the file, tensor, field or option, never hangs, and writes or overwrites
# nothing. Usage: hardening_cli.sh AVDIT_BINARY SHARED_DIR SOURCE_DIR
set -u
. "$(dirname "$0")/lib/prelude.sh"
H3=$shared/golden/h3-tiny
M2=$shared/golden/magi2-tiny
W=$tmp/w  # every refused command is given outputs here; it must stay empty
mkdir -p "$W"
failed=0
bad() { echo "FAIL $*"; failed=1; }

av() { timeout 60 "$avdit" "$@"; }  # every run is bounded: a hang fails with exit 124
# expect NAME RC MESSAGE CMD...: CMD exits RC, stderr holds MESSAGE (a fixed string) on one line,
# and $W stays empty.
expect() {
  local name=$1 want=$2 msg=$3
  shift 3
  "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
  local rc=$?
  if [ "$rc" != "$want" ]; then
    bad "$name: exit $rc, expected $want"; sed 's/^/  | /' "$tmp/out.txt" "$tmp/err.txt" | head -20
  elif [ -n "$msg" ] && ! grep -qF -- "$msg" "$tmp/err.txt"; then
    bad "$name: stderr lacks '$msg'"; sed 's/^/  | /' "$tmp/err.txt"
  elif [ "$want" = 2 ] && [ "$(grep -c . "$tmp/err.txt")" != 1 ]; then
    bad "$name: expected one line on stderr"; sed 's/^/  | /' "$tmp/err.txt"
  else
    echo "ok   $name (exit $rc)"
  fi
  if [ -n "$(ls -A "$W")" ]; then bad "$name: wrote into the output folder: $(ls -A "$W")"; rm -rf "${W:?}"/*; fi
}
gen() { av -q generate --model "$H3" "$@"; }
# The tiny H3 model's text states, seeded noise of latent shape $LS (default 2,4,6,9), $STEPS (1) steps.
gen_h3() { gen --text "$H3/inputs.safetensors" --latent-shape "${LS:-2,4,6,9}" --steps "${STEPS:-1}" "$@"; }

# ---- hostile files ---------------------------------------------------------------------------
python3 - "$tmp" "$H3" <<'PY'
import json, os, struct, sys
tmp, h3 = sys.argv[1], sys.argv[2]
def read(path):
    b = open(path, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
def write(path, header, data):
    h = json.dumps(header).encode(); h += b' ' * (-len(h) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + data)
def poison(src, dst, name, index, value):  # one element of an F32 tensor set to value
    header, data = read(src); data = bytearray(data)
    b = header[name]['data_offsets'][0] + 4 * index
    data[b:b + 4] = struct.pack('<f', value); write(dst, header, bytes(data))
def entry(dtype, shape, b, e): return {'dtype': dtype, 'shape': shape, 'data_offsets': [b, e]}
write(f'{tmp}/wrap.safetensors', {'text_embeds': entry('F32', [2**53 + 1, 64], 0, 256)}, b'\0' * 256)
write(f'{tmp}/square.safetensors', {'x': entry('F32', [2**31, 2**31], 0, 0)}, b'')
write(f'{tmp}/dimmax.safetensors', {'x': entry('F32', [2**64 - 1], 0, 0)}, b'')
write(f'{tmp}/zerohuge.safetensors', {'video_latent': entry('F32', [0, 2**63 - 1], 0, 0)}, b'')
nan = float('nan'); inf = float('inf')
poison(f'{h3}/inputs.safetensors', f'{tmp}/nan_text.safetensors', 'text_embeds', 5, nan)
poison(f'{h3}/sampler.safetensors', f'{tmp}/inf_noise.safetensors', 'noise_audio', 0, inf)
poison(f'{h3}/inputs.safetensors', f'{tmp}/nan_inputs.safetensors', 'video_latent', 7, nan)
open(f'{tmp}/deep.json', 'w').write('[' * 1_000_000 + ']' * 1_000_000)
cfg = json.load(open(f'{h3}/config.json'))
open(f'{tmp}/huge.json', 'w').write(json.dumps(dict(cfg, num_layers=10**9)))
open(f'{tmp}/frac.json', 'w').write(json.dumps(dict(cfg, hidden_size=192.5)))
open(f'{tmp}/secret.safetensors', 'wb').write(b'SECRET!!' + b'z' * 64)
PY
# Model folders: the tiny H3 model with one thing replaced.
model() {  # model NAME: a folder with config.json copied and model.safetensors linked
  mkdir -p "$tmp/$1" && cp "$H3/config.json" "$tmp/$1/" && ln -s "$H3/model.safetensors" "$tmp/$1/model.safetensors"
}
model m_deep && cp "$tmp/deep.json" "$tmp/m_deep/config.json"
model m_huge && cp "$tmp/huge.json" "$tmp/m_huge/config.json"
model m_frac && cp "$tmp/frac.json" "$tmp/m_frac/config.json"
model m_fifo && rm "$tmp/m_fifo/model.safetensors" && mkfifo "$tmp/m_fifo/model.safetensors"
index() {  # index NAME SHARD: a folder whose index puts every tensor in SHARD
  mkdir -p "$tmp/$1" && cp "$H3/config.json" "$tmp/$1/"
  python3 - "$H3/model.safetensors" "$2" > "$tmp/$1/model.safetensors.index.json" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]
names = [k for k in json.loads(b[8:8 + n]) if k != '__metadata__']
print(json.dumps({'weight_map': {k: sys.argv[2] for k in names}}))
PY
}
mkdir -p "$tmp/elsewhere" && cp "$H3/model.safetensors" "$tmp/elsewhere/model.safetensors"
index m_up ../elsewhere/model.safetensors
index m_abs /etc/passwd
index m_abs2 "$tmp/secret.safetensors"
index m_link shard.safetensors && ln -s "$tmp/secret.safetensors" "$tmp/m_link/shard.safetensors"
index m_shardfifo shard.safetensors && mkfifo "$tmp/m_shardfifo/shard.safetensors"
index m_ok shard.safetensors && ln -s "$tmp/m_ok/real.safetensors" "$tmp/m_ok/shard.safetensors" \
  && cp "$H3/model.safetensors" "$tmp/m_ok/real.safetensors"
mkfifo "$tmp/fifo.safetensors"

# ---- overflowing shapes ----------------------------------------------------------------------
expect overflow-text 2 "wrap.safetensors: tensor 'text_embeds': shape [9007199254740993, 64] too large: more than 2^56" \
  gen --text "$tmp/wrap.safetensors" --latent-shape 2,4,6,9 --out "$W/o.safetensors"
expect overflow-inputs 2 "wrap.safetensors: tensor 'text_embeds'" \
  av forward --model "$H3" --inputs "$tmp/wrap.safetensors" --out "$W/o.safetensors"
expect overflow-square 2 "square.safetensors: tensor 'x': shape [2147483648, 2147483648]" av inspect "$tmp/square.safetensors"
expect overflow-dim 2 "dimmax.safetensors: tensor 'x': shape too large: dimension 18446744073709551615 exceeds" av inspect "$tmp/dimmax.safetensors"
expect overflow-zero-dim 2 "zerohuge.safetensors: tensor 'video_latent': shape too large: dimension 9223372036854775807 exceeds" \
  av inspect "$tmp/zerohuge.safetensors"
expect overflow-latent-shape 2 "latent shape [1, 24, 4000000000, 4000000000, 4000000000] has more than 2^56" \
  gen --text "$H3/inputs.safetensors" --latent-shape 4000000000,4000000000,4000000000,9 --out "$W/o.safetensors"
expect memory-latent-shape 2 "MemAvailable is" \
  gen --text "$H3/inputs.safetensors" --latent-shape 2000,4000,6000,9 --out "$W/o.safetensors"
expect memory-trajectory 2 "MemAvailable is" gen --text "$H3/inputs.safetensors" --latent-shape 50,64,64,90 \
  --steps 10000 --save-trajectory "$W/t.safetensors"
expect too-many-steps 2 "--steps 1000000000: expected 1 to 10000" \
  gen --text "$H3/inputs.safetensors" --latent-shape 2,4,6,9 --steps 1000000000 --out "$W/o.safetensors"

# ---- deep JSON, huge and fractional configs ---------------------------------------------------
expect deep-config 2 "m_deep/config.json: JSON nested deeper than 64 levels" \
  av generate --model "$tmp/m_deep" --text "$H3/inputs.safetensors" --latent-shape 2,4,6,9 --out "$W/o.safetensors"
expect deep-inspect 2 "deep.json: JSON nested deeper" av inspect "$tmp/deep.json"
expect huge-config 2 "H3 config: field 'num_layers' must be an integer in [1, 1024], found 1000000000" \
  av generate --model "$tmp/m_huge" --text "$H3/inputs.safetensors" --latent-shape 2,4,6,9 --out "$W/o.safetensors"
expect huge-inspect 2 "field 'num_layers'" av inspect "$tmp/huge.json"
expect huge-init 2 "field 'num_layers'" av init --config "$tmp/huge.json" --out "$W/model"
expect fractional-config 2 "field 'hidden_size' must be an integer in [1, 65536], found 192.5" \
  av forward --model "$tmp/m_frac" --inputs "$H3/inputs.safetensors" --out "$W/o.safetensors"

# ---- FIFOs (a FIFO used to block open() forever) ------------------------------------------------
expect fifo-model 2 "m_fifo/model.safetensors: a FIFO, expected a regular file" \
  av generate --model "$tmp/m_fifo" --text "$H3/inputs.safetensors" --latent-shape 2,4,6,9 --out "$W/o.safetensors"
expect fifo-shard 2 "m_shardfifo/shard.safetensors: a FIFO" \
  av forward --model "$tmp/m_shardfifo" --inputs "$H3/inputs.safetensors" --out "$W/o.safetensors"
expect fifo-text 2 "fifo.safetensors: a FIFO" gen --text "$tmp/fifo.safetensors" --latent-shape 2,4,6,9 \
  --out "$W/o.safetensors"
expect fifo-inspect 2 "fifo.safetensors: a FIFO" av inspect "$tmp/fifo.safetensors"
expect folder-as-file 2 "m_deep: a folder, expected a regular file" \
  av generate --model "$H3" --text "$tmp/m_deep" --latent-shape 2,4,6,9 --out "$W/o.safetensors"

# ---- shard traversal ----------------------------------------------------------------------------
expect traversal-up 2 "shard '../elsewhere/model.safetensors' (tensor" \
  av generate --model "$tmp/m_up" --text "$H3/inputs.safetensors" --latent-shape 2,4,6,9 --out "$W/o.safetensors"
expect traversal-absolute 2 "shard '/etc/passwd' (tensor" av inspect "$tmp/m_abs"
expect traversal-absolute-in-tmp 2 "is an absolute path" \
  av forward --model "$tmp/m_abs2" --inputs "$H3/inputs.safetensors" --out "$W/o.safetensors"
expect traversal-symlink 2 "outside the model folder" av inspect "$tmp/m_link/model.safetensors.index.json"
grep -q "SECRET\|root:" "$tmp/err.txt" && bad "traversal: a file outside the model folder was quoted"
expect symlink-inside-ok 0 "" av -q forward --model "$tmp/m_ok" --inputs "$H3/inputs.safetensors" \
  --out "$tmp/ok.safetensors"

# ---- NaN / Inf in inputs and options ------------------------------------------------------------
expect nan-text 2 "nan_text.safetensors:text_embeds: element [0, 5] of shape" \
  gen --text "$tmp/nan_text.safetensors" --latent-shape 2,4,6,9 --out "$W/o.safetensors"
expect nan-negative 2 "nan_text.safetensors:text_embeds: element [0, 5]" \
  gen_h3 --negative "$tmp/nan_text.safetensors" --guidance 2 --out "$W/o.safetensors"
expect inf-noise 2 "inf_noise.safetensors:noise_audio: element [0, 0, 0] of shape" \
  av generate --model "$H3" --text "$H3/inputs.safetensors" --noise "$tmp/inf_noise.safetensors" --steps 1 \
  --out "$W/o.safetensors"
expect nan-inputs 2 "nan_inputs.safetensors:video_latent: element" \
  av forward --model "$H3" --inputs "$tmp/nan_inputs.safetensors" --out "$W/o.safetensors"
for opt in "--guidance nan" "--shift inf" "--video-guidance -inf" "--audio-guidance nan" "--shift -nan"; do
  expect "option $opt" 2 ": must be a finite number" gen_h3 $opt --out "$W/o.safetensors"
  grep -qF -- "avdit: error: ${opt%% *} " "$tmp/err.txt" || bad "option $opt: the option is not named"
done
expect seed-beyond-2^64 2 "avdit: error: --seed: '18446744073709551616' is not an integer in [0, 2^64 - 1]" \
  gen_h3 --seed 18446744073709551616 --out "$W/o.safetensors"
expect seed-negative 2 "--seed: '-1' is not an integer" gen_h3 --seed -1 --out "$W/o.safetensors"
gen_h3 --save-trajectory "$tmp/traj.safetensors" >/dev/null 2>&1 || bad "trajectory for the teacher test"
python3 - "$tmp/traj.safetensors" "$tmp/nan_traj.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n]); data = bytearray(b[8 + n:])
s = h['latents_audio']['data_offsets'][0] + 4 * 3
data[s:s + 4] = struct.pack('<f', float('nan'))
open(sys.argv[2], 'wb').write(b[:8 + n] + bytes(data))
PY
expect nan-teacher 2 "nan_traj.safetensors:latents_audio: element" gen_h3 --teacher "$tmp/nan_traj.safetensors" \
  --out "$W/o.safetensors"

# ---- outputs: out = in, unwritable or missing folder, out is a folder ----------------------------
mkdir -p "$tmp/copy" && cp "$H3"/config.json "$H3"/model.safetensors "$H3"/inputs.safetensors "$H3"/sampler.safetensors "$tmp/copy/"
ln "$tmp/copy/sampler.safetensors" "$tmp/copy/noise_link.safetensors"
(cd "$tmp/copy" && sha256sum config.json model.safetensors inputs.safetensors sampler.safetensors > "$tmp/copy.sha")
C=$tmp/copy
expect out-is-model 2 "--out $C/model.safetensors: is the input file $C/model.safetensors (same inode)" \
  av generate --model "$C" --text "$C/inputs.safetensors" --latent-shape 2,4,6,9 --steps 1 --out "$C/model.safetensors"
expect out-is-text 2 "is the input file $C/inputs.safetensors" \
  av generate --model "$C" --text "$C/inputs.safetensors" --latent-shape 2,4,6,9 --steps 1 --out "$C/inputs.safetensors"
expect out-is-noise-hardlink 2 "--out $C/noise_link.safetensors: is the input file $C/sampler.safetensors" \
  av generate --model "$C" --text "$C/inputs.safetensors" --noise "$C/sampler.safetensors" --steps 1 \
  --out "$C/noise_link.safetensors"
expect trajectory-is-config 2 "--save-trajectory $C/config.json: is the input file" \
  av generate --model "$C" --text "$C/inputs.safetensors" --latent-shape 2,4,6,9 --steps 1 \
  --save-trajectory "$C/config.json"
expect forward-out-is-inputs 2 "--out $C/inputs.safetensors: is the input file" \
  av forward --model "$C" --inputs "$C/inputs.safetensors" --out "$C/inputs.safetensors"
expect out-equals-trajectory 2 "are the same file" gen_h3 --out "$W/x.safetensors" --save-trajectory "$W/../w/x.safetensors"
(cd "$C" && sha256sum -c --quiet "$tmp/copy.sha") || bad "out = in: an input was changed"
[ -z "$(ls -A "$C" | grep -v -E '^(config.json|model.safetensors|inputs.safetensors|sampler.safetensors|noise_link.safetensors)$')" ] \
  || bad "out = in: files appeared in the model folder: $(ls -A "$C")"
if [ "$(id -u)" = 0 ]; then ro=/sys; else ro=$tmp/ro; mkdir -p "$ro"; chmod 555 "$ro"; fi
expect unwritable-folder 2 "--out $ro/x.safetensors: cannot create files in $ro" gen_h3 --out "$ro/x.safetensors"
expect missing-folder 2 "--save-trajectory $W/nope/t.safetensors: folder $W/nope does not exist" \
  gen_h3 --save-trajectory "$W/nope/t.safetensors"
mkdir -p "$tmp/outdir"
expect out-is-folder 2 "--out $tmp/outdir: names a folder" gen_h3 --out "$tmp/outdir"
expect out-is-folder-slash 2 "names a folder" av forward --model "$H3" --inputs "$H3/inputs.safetensors" --out "$W/"
[ -z "$(ls -A "$tmp/outdir")" ] && [ -z "$(ls -A "$tmp" | grep -E '\.tmp$')" ] || bad "out is a folder: a temporary file was left"
expect out-is-fifo 2 "is a FIFO; avdit writes regular files only" gen_h3 --out "$tmp/fifo.safetensors"
[ -p "$tmp/fifo.safetensors" ] || bad "out is a FIFO: the FIFO was replaced"

# ---- planted symlink at the old fixed temporary name ----------------------------------------------
mkdir -p "$tmp/s" && echo precious > "$tmp/s/victim"
ln -s "$tmp/s/victim" "$tmp/s/out.safetensors.tmp"
expect symlinked-temp 0 "" gen_h3 --out "$tmp/s/out.safetensors"
[ "$(cat "$tmp/s/victim")" = precious ] || bad "symlinked temp: the symlink's target was overwritten"
[ -f "$tmp/s/out.safetensors" ] && [ ! -L "$tmp/s/out.safetensors" ] || bad "symlinked temp: no regular output"

# ---- concurrent writers of one (output, trajectory) pair ------------------------------------------
# consistent DIR: the pair in DIR (when both exist) comes from one run: final_* == last latents_*.
consistent() {
  python3 - "$1/out.safetensors" "$1/traj.safetensors" <<'PY'
import json, os, struct, sys
def read(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; return json.loads(b[8:8 + n]), b[8 + n:]
out, traj = sys.argv[1], sys.argv[2]
if not (os.path.exists(out) and os.path.exists(traj)): sys.exit(0)
ho, do = read(out); ht, dt = read(traj)
for m in ('video', 'audio'):
    s, e = ho['final_' + m]['data_offsets']; ts, te = ht['latents_' + m]['data_offsets']
    if do[s:e] != dt[te - (e - s):te]: sys.exit(f'final_{m} is not the trajectory\'s last latents_{m}')
PY
}
mkdir -p "$tmp/c"
pids=()
for seed in 1 2 3 4; do
  STEPS=3 gen_h3 --seed "$seed" --out "$tmp/c/out.safetensors" --save-trajectory "$tmp/c/traj.safetensors" \
    >/dev/null 2>&1 & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || bad "concurrent writers: a run failed"; done
consistent "$tmp/c" || bad "concurrent writers: the output and the trajectory come from different runs"
[ "$(ls -A "$tmp/c" | sort | tr '\n' ' ')" = "out.safetensors traj.safetensors " ] \
  || bad "concurrent writers: stray files: $(ls -A "$tmp/c")"
echo "ok   concurrent-writers"

# ---- a kill at any moment never leaves a new output beside an old trajectory ----------------------
for i in 1 2 3 4 5 6 7 8; do
  LS=9,16,16,120 STEPS=2 gen_h3 --seed 9 --out "$tmp/c/out.safetensors" --save-trajectory "$tmp/c/traj.safetensors" \
    >/dev/null 2>&1 &
  pid=$!
  sleep "$(printf 0.%02d $((i * 6)))"  # 0.06 s to 0.48 s: from loading the model to after the rename
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  consistent "$tmp/c" || bad "kill $i: new and old files side by side"
  rm -f "$tmp"/c/.*.tmp
  gen_h3 --seed "$i" --out "$tmp/c/out.safetensors" --save-trajectory "$tmp/c/traj.safetensors" \
    >/dev/null 2>&1 || bad "kill $i: the next run failed"
done
echo "ok   kill-while-publishing"

exit $failed
