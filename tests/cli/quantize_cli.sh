#!/usr/bin/env bash
# `avdit quantize --nvfp4 experts` end to end on the golden MAGI-2 tiny model: the packed checkpoint
# holds exactly the documented tensors (names, dtypes, shapes), its codes, block scales and global
# scales equal an independent numpy implementation of TransformerEngine's recipe bit for bit, every
# other tensor and config.json are copied byte for byte; inspect accepts it, forward runs it (close
# to, not equal to, the bf16 experts); inspect --nvfp4-experts reports the official config's memory;
# bad usage exits 2 and leaves nothing behind.
# Arguments: AVDIT_BINARY SHARED_DIR SOURCE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/prelude.sh" "$@"

g=$shared/golden/magi2-tiny
"$avdit" quantize --nvfp4 experts "$g" "$tmp/q" 2>"$tmp/quantize.log" || { cat "$tmp/quantize.log"; fail "quantize"; }
grep -q "6 routed-expert tensors packed" "$tmp/quantize.log" || { cat "$tmp/quantize.log"; fail "quantize summary"; }
cmp -s "$g/config.json" "$tmp/q/config.json" || fail "config.json not copied byte for byte"
ls -a "$tmp" | grep -q '\.tmp-' && fail "temporary folder left behind"

"$py" - "$g/model.safetensors" "$tmp/q/model.safetensors" <<'PY' || fail "packed checkpoint content"
import json, struct, sys
import ml_dtypes
import numpy as np

def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}

src, out = read(sys.argv[1]), read(sys.argv[2])
routed = [k for k in src if k.endswith(("moe_mlp.W_gate", "moe_mlp.W_up", "moe_mlp.W_down"))]
assert len(routed) == 6, routed
want_names = set(src) - set(routed)
for k in routed:
    want_names |= {k + ".nvfp4_values", k + ".nvfp4_block_scale", k + ".nvfp4_global_scale"}
assert set(out) == want_names, sorted(set(out) ^ want_names)
for k in set(src) - set(routed):
    assert out[k] == src[k], f"{k} not copied unchanged"

F32, FMAX = np.float32, np.float32(np.finfo(np.float32).max)
np.seterr(all="ignore")
for k in routed:
    dt, (G, K, N), raw = src[k]
    assert dt == "BF16", dt
    w = np.frombuffer(raw, dtype=ml_dtypes.bfloat16).reshape(G, K, N).astype(F32)
    wt = np.ascontiguousarray(w.transpose(0, 2, 1)).reshape(G, N, K // 16, 16)  # K-major blocks
    # TransformerEngine's NVFP4 recipe, float32 step by step (transformer_engine/pytorch/custom_recipes/reference_nvfp4.py).
    amax = np.abs(w).reshape(G, -1).max(axis=1)
    s = np.minimum(F32(448.0 * 6.0) / amax, FMAX)
    s = np.where((s == 0) | (amax == 0), F32(1), s).astype(F32)
    s_dec = (F32(1) / s).astype(F32)
    mult = (s * F32(1.0 / 6.0)).astype(F32)
    bam = np.abs(wt).max(axis=3)
    dec = np.minimum(bam * mult[:, None, None], FMAX)
    bs = np.clip(dec, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    inv = np.minimum(F32(1) / (bs.astype(F32) * s_dec[:, None, None]), FMAX).astype(F32)
    q = np.clip(wt * inv[..., None], -6, 6).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    q = q.reshape(G, N, K)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    v_dt, v_shape, v_raw = out[k + ".nvfp4_values"]
    b_dt, b_shape, b_raw = out[k + ".nvfp4_block_scale"]
    s_dt, s_shape, s_raw = out[k + ".nvfp4_global_scale"]
    assert (v_dt, v_shape) == ("U8", [G, N, K // 2]), (v_dt, v_shape)
    assert (b_dt, b_shape) == ("F8_E4M3", [G, N, K // 16]), (b_dt, b_shape)
    assert (s_dt, s_shape) == ("F32", [G]), (s_dt, s_shape)
    assert np.frombuffer(s_raw, np.float32).tobytes() == s.tobytes(), f"{k}: global scales differ"
    assert b_raw == bs.view(np.uint8).tobytes(), f"{k}: block scales differ"
    got = np.frombuffer(v_raw, np.uint8).reshape(G, N, K // 2)
    assert got.tobytes() == packed.tobytes(), f"{k}: {int((got != packed).sum())} of {got.size} value bytes differ"
    # Decode (q * bs) / S and the error against the bf16 weights: ~9.5% for Gaussian-like weights.
    codes = np.stack([got & 0xF, got >> 4], axis=-1).reshape(G, N, K // 16, 16)
    vals = codes.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(F32)
    x = (vals * bs.astype(F32)[..., None]) / s[:, None, None, None]
    err = np.sqrt(((x - wt) ** 2).sum() / (wt ** 2).sum())
    assert 0.07 < err < 0.12, f"{k}: relative RMS error {err}"
    print(f"{k}: codes, block scales and global scales equal numpy's TE recipe; relative RMS error {err:.4f}")
PY

# inspect accepts the packed checkpoint (the routed experts are present in packed form).
"$avdit" inspect "$tmp/q" >"$tmp/inspect.txt"
grep -q "every tensor the config implies is present with the expected shape (6 routed-expert stacks NVFP4-packed)" \
  "$tmp/inspect.txt" || { cat "$tmp/inspect.txt"; fail "inspect of the packed checkpoint"; }
grep -q "F8_E4M3" "$tmp/inspect.txt" || fail "inspect lists no F8_E4M3 tensors"

# forward loads it as it is: a different result from bf16 experts, but a close one.
"$avdit" forward --model "$g" --inputs "$g/inputs.safetensors" --out "$tmp/bf16.safetensors"
"$avdit" forward --model "$tmp/q" --inputs "$g/inputs.safetensors" --out "$tmp/nvfp4.safetensors"
if "$py" "$src/python/compare_tensors.py" "$tmp/nvfp4.safetensors" "$tmp/bf16.safetensors" --rtol 0 \
  --names model_output >/dev/null; then fail "NVFP4 experts changed nothing"; fi
"$py" "$src/python/compare_tensors.py" "$tmp/nvfp4.safetensors" "$tmp/bf16.safetensors" --rtol 0.2 \
  --names video_velocity,audio_velocity,model_output || fail "NVFP4 forward far from the bf16 one"

# The memory report on the official preview config.
cfg=$shared/reference-configs/magi2/magi2_preview.json
"$avdit" inspect --nvfp4-experts "$cfg" >"$tmp/mem.txt"
for want in "routed experts bf16: 217.4 GB" "routed experts nvfp4: 61.2 GB (57.0 GiB" "nvfp4 bits per weight: 4.500" \
  "resident weights:" "activation peak at T = 58000:" "resident total (single GPU):"; do
  grep -qF "$want" "$tmp/mem.txt" || { cat "$tmp/mem.txt"; fail "inspect --nvfp4-experts lacks '$want'"; }
done
"$avdit" inspect --nvfp4-experts --json "$cfg" >"$tmp/mem.json"
"$py" - "$tmp/mem.json" <<'PY' || fail "inspect --nvfp4-experts --json"
import json, sys
j = json.load(open(sys.argv[1]))["nvfp4_experts"]
assert j["expert_matrices"] == 36 * 3 * 12 * 256, j["expert_matrices"]
assert abs(j["routed_bf16_bytes"] / 1e9 - 217.4) < 0.1 and abs(j["routed_nvfp4_bytes"] / 2**30 - 57.0) < 0.1, j
assert abs(j["bits_per_weight"] - 4.5) < 1e-3
assert j["weight_bytes"] == j["routed_nvfp4_bytes"] + j["other_weight_bytes"]
assert j["activation_bytes"] == sum(p["bytes"] for p in j["activation_parts"])
assert j["resident_total_bytes"] == j["weight_bytes"] + j["activation_bytes"]
# Non-expert weights of the preview: ~5.2B params, mostly bf16 -> 10-12 GB.
assert 9e9 < j["other_weight_bytes"] < 13e9, j["other_weight_bytes"]
print(f"resident: weights {j['weight_bytes']/1e9:.1f} GB + activations {j['activation_bytes']/1e9:.1f} GB "
      f"= {j['resident_total_bytes']/1e9:.1f} GB")
PY
set +e
"$avdit" inspect --nvfp4-experts "$shared/golden/h3-tiny" >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "inspect --nvfp4-experts on H3: exit $rc, want 2"

# Bad usage: exit 2, nothing written.
"$avdit" quantize --nvfp4 attention "$g" "$tmp/x" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown --nvfp4 mode" "$tmp/err" || fail "unknown mode: exit $rc $(cat "$tmp/err")"
"$avdit" quantize --nvfp4 experts "$g" "$tmp/q" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "already exists" "$tmp/err" || fail "existing output: exit $rc $(cat "$tmp/err")"
"$avdit" quantize --nvfp4 experts "$shared/golden/h3-tiny" "$tmp/x" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "not a MAGI-2 checkpoint" "$tmp/err" || fail "H3 input: exit $rc $(cat "$tmp/err")"
"$avdit" quantize --nvfp4 experts "$tmp/q" "$tmp/x" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "already holds NVFP4-packed experts" "$tmp/err" || fail "packed input: exit $rc $(cat "$tmp/err")"
"$avdit" quantize "$g" "$tmp/x" 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "missing --nvfp4: exit $rc"
[ -e "$tmp/x" ] && fail "a failed quantize left $tmp/x"
ls -a "$tmp" | grep -q '\.tmp-' && fail "temporary folder left behind"
echo "quantize_cli: ok"
