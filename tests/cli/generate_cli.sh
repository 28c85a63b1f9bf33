#!/usr/bin/env bash
# `avdit generate` end to end: the issue's H3 example and the MAGI-2 fixture run reproduce the
# goldens, reruns are reproducible (SHA-256), teacher forcing replays a saved trajectory, and bad
# input exits 2 with a message. Usage: generate_cli.sh AVDIT_BINARY SHARED_DIR SOURCE_DIR
set -u
AVDIT=$1
SHARED=$2
H3=$SHARED/golden/h3-tiny
M2=$SHARED/golden/magi2-tiny
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() {  # check NAME EXPECTED_RC CMD...
  local name=$1 want=$2
  shift 2
  "$@" >"$TMP/out.txt" 2>"$TMP/err.txt"
  local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL $name: exit $rc, expected $want"; sed 's/^/  | /' "$TMP/out.txt" "$TMP/err.txt"; fail=1
  else
    echo "ok   $name (exit $rc)"
  fi
}
# max |a - b| / max |b| over float32 tensors, read with the standard library only.
compare() {  # compare OUT.safetensors OUT_NAME GOLDEN.safetensors GOLDEN_NAME TOL
  python3 - "$@" <<'PY'
import json, struct, sys, array
def read(path, name):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])[name]
    assert h['dtype'] == 'F32', h
    s, e = h['data_offsets']
    a = array.array('f'); a.frombytes(b[8 + n + s:8 + n + e])
    return h['shape'], a
sa, a = read(sys.argv[1], sys.argv[2]); sb, g = read(sys.argv[3], sys.argv[4])
if sa != sb: sys.exit(f"{sys.argv[2]}: shape {sa} != golden {sb}")
diff = max(abs(x - y) for x, y in zip(a, g)); ref = max(abs(y) for y in g)
rel = diff / ref
print(f"     {sys.argv[2]} vs {sys.argv[4]}: max abs {diff:.3e}, of max {rel:.3e} (tol {sys.argv[5]})")
sys.exit(0 if rel <= float(sys.argv[5]) else 1)
PY
  [ $? = 0 ] || { echo "FAIL compare $2"; fail=1; }
}
sha_of() { grep "^$1 " "$TMP/out.txt" | awk '{print $NF}'; }

# The issue's example: H3, fixture text and noise, 4 steps.
check h3-example 0 "$AVDIT" generate --model "$H3" --text "$H3/inputs.safetensors" \
  --noise "$H3/sampler.safetensors" --steps 4 --out "$TMP/h3.safetensors"
cat "$TMP/out.txt"
compare "$TMP/h3.safetensors" final_video "$H3/sampler.safetensors" final_video 1e-4
compare "$TMP/h3.safetensors" final_audio "$H3/sampler.safetensors" final_audio 1e-4

# MAGI-2: the fixture's txt_feat / null_txt_feat / init latents from its sampler file.
check magi2-fixture 0 "$AVDIT" generate --model "$M2" --text "$M2/sampler.safetensors" \
  --negative "$M2/sampler.safetensors" --noise "$M2/sampler.safetensors" --out "$TMP/m2.safetensors"
cat "$TMP/out.txt"
compare "$TMP/m2.safetensors" final_video "$M2/sampler.safetensors" final_video_latent 5e-3
compare "$TMP/m2.safetensors" final_audio "$M2/sampler.safetensors" final_audio_latent 5e-3

# Seeded noise: same seed, same SHA-256; another seed differs; --json summary.
check h3-seed7 0 "$AVDIT" generate --model "$H3" --text "$H3/inputs.safetensors" --latent-shape 2,4,6,9 \
  --steps 3 --seed 7 --save-trajectory "$TMP/traj.safetensors"
first=$(sha_of final_video)
check h3-seed7-again 0 "$AVDIT" generate --model "$H3" --text "$H3/inputs.safetensors" --latent-shape 2,4,6,9 \
  --steps 3 --seed 7
[ -n "$first" ] && [ "$first" = "$(sha_of final_video)" ] || { echo "FAIL same seed gave different SHA-256"; fail=1; }
check h3-seed8 0 "$AVDIT" generate --model "$H3" --text "$H3/inputs.safetensors" --latent-shape 2,4,6,9 \
  --steps 3 --seed 8
[ "$first" != "$(sha_of final_video)" ] || { echo "FAIL different seeds gave the same SHA-256"; fail=1; }
check h3-teacher 0 "$AVDIT" generate --model "$H3" --text "$H3/inputs.safetensors" --latent-shape 2,4,6,9 \
  --steps 3 --seed 8 --teacher "$TMP/traj.safetensors" --json
python3 -c "import json,sys; j=json.load(open('$TMP/out.txt')); sys.exit(0 if j['final_video']['sha256']=='$first' and j['family']=='h3' and len(j['step_seconds'])==3 and j['teacher_step_error']['video']==[0.0]*3 else 1)" \
  || { echo "FAIL teacher-forced run (or --json summary) does not reproduce the trajectory's SHA-256"; fail=1; }

# FP8 block GEMMs (H3, CPU emulation): runs, repeats its bits, differs from the fp32 run; refused
# for MAGI-2, with fp16, on CUDA builds' GPU path (not written), and for an unknown scaling.
F8=("$AVDIT" generate --model "$H3" --text "$H3/inputs.safetensors" --latent-shape 2,4,6,9 --steps 2 --seed 3 --json)
check h3-fp8 0 "${F8[@]}" --fp8-gemm row
f8=$(python3 -c "import json; print(json.load(open('$TMP/out.txt'))['final_video']['sha256'])")
check h3-fp8-again 0 "${F8[@]}" --fp8-gemm row
[ "$f8" = "$(python3 -c "import json; print(json.load(open('$TMP/out.txt'))['final_video']['sha256'])")" ] ||
  { echo "FAIL --fp8-gemm rerun differs"; fail=1; }
check h3-fp32 0 "${F8[@]}"
f32=$(python3 -c "import json; print(json.load(open('$TMP/out.txt'))['final_video']['sha256'])")
[ "$f8" != "$f32" ] || { echo "FAIL --fp8-gemm gave the fp32 run's bits"; fail=1; }
# MAGI-2 (its dense GEMMs; attention with its sinks): runs, repeats its bits, differs from fp32.
M8=("$AVDIT" generate --model "$M2" --text "$M2/sampler.safetensors" --latent-shape 2,4,6,10 --steps 2 --seed 3 --json)
sha() { python3 -c "import json; print(json.load(open('$TMP/out.txt'))['final_video']['sha256'])"; }
check magi2-fp32 0 "${M8[@]}"
m32=$(sha)
check magi2-fp8 0 "${M8[@]}" --fp8-gemm tensor
m8=$(sha)
[ "$m8" != "$m32" ] || { echo "FAIL MAGI-2 --fp8-gemm gave the fp32 run's bits"; fail=1; }
check magi2-fp8-again 0 "${M8[@]}" --fp8-gemm tensor
[ "$m8" = "$(sha)" ] || { echo "FAIL MAGI-2 --fp8-gemm rerun differs"; fail=1; }
# FP8 attention with MAGI-2's sinks (ops/attention_fp8.h, the CPU emulation): runs, repeats its
# bits, differs from fp32.
check magi2-fp8-attn 0 "${M8[@]}" --fp8-attention
ma=$(sha)
[ "$m32" != "$ma" ] || { echo "FAIL MAGI-2 --fp8-attention gave the fp32 run's bits"; fail=1; }
check magi2-fp8-attn-again 0 "${M8[@]}" --fp8-attention
[ "$ma" = "$(sha)" ] || { echo "FAIL MAGI-2 --fp8-attention rerun differs"; fail=1; }
check fp8-fp16 2 "${F8[@]}" --fp8-gemm tensor --precision fp16
check fp8-bad-scaling 2 "${F8[@]}" --fp8-gemm block
# FP8 attention (H3, CPU emulation) on a latent of several 128-row scale blocks: runs and differs
# from the fp32 run.
FA=("$AVDIT" generate --model "$H3" --text "$H3/inputs.safetensors" --latent-shape 2,32,64,9 --steps 2 --seed 3 --json)
check h3-fp32-long 0 "${FA[@]}"
fa32=$(sha)
check h3-fp8-attn 0 "${FA[@]}" --fp8-attention
[ "$fa32" != "$(sha)" ] || { echo "FAIL --fp8-attention gave the fp32 run's bits"; fail=1; }

# Bad input: exit 2 and a message naming the problem.
check missing-text 2 "$AVDIT" generate --model "$H3" --text "$TMP/nope.safetensors" --latent-shape 1,2,2,3
grep -q "nope.safetensors: no such file" "$TMP/err.txt" || { echo "FAIL missing-text message"; fail=1; }
check wrong-tensor-name 2 "$AVDIT" generate --model "$H3" --text "$H3/sampler.safetensors" --latent-shape 1,2,2,3
grep -q "no tensor named text_embeds" "$TMP/err.txt" || { echo "FAIL wrong-tensor-name message"; fail=1; }
check noise-without-audio 2 "$AVDIT" generate --model "$H3" --text "$H3/inputs.safetensors" \
  --noise "$H3/inputs.safetensors"
grep -q "noise_video" "$TMP/err.txt" || { echo "FAIL noise message"; fail=1; }
python3 - "$TMP/narrow.safetensors" <<'PY'
import json, struct, sys
data = struct.pack('<128f', *([0.5] * 128))  # text_embeds [4, 32]: both tiny models expect 64 wide
h = json.dumps({"text_embeds": {"dtype": "F32", "shape": [4, 32], "data_offsets": [0, len(data)]}}).encode()
h += b' ' * (-len(h) % 8)
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + data)
PY
check wrong-width 2 "$AVDIT" generate --model "$M2" --text "$TMP/narrow.safetensors" --latent-shape 1,2,2,3 --steps 1
grep -q "narrow.safetensors:text_embeds (text features) has width 32, this model expects 64" "$TMP/err.txt" \
  || { echo "FAIL wrong-width message"; fail=1; }
check bad-latent-shape 2 "$AVDIT" generate --model "$H3" --text "$H3/inputs.safetensors" --latent-shape 1,2
check no-size 2 "$AVDIT" generate --model "$H3" --text "$H3/inputs.safetensors"
check missing-model 2 "$AVDIT" generate --model "$TMP/no-model" --text "$H3/inputs.safetensors" --latent-shape 1,2,2,3
check h3-cfg-without-negative 2 "$AVDIT" generate --model "$H3" --text "$H3/inputs.safetensors" \
  --latent-shape 1,2,2,3 --guidance 3

exit $fail
