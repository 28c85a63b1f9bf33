"""A Qwen3-VL text encoder folder at full width (hidden 5120, 64 x 128 heads, 8 kv heads, MLP
25600) with only the first few layers and random bf16 weights, plus a fixture-format prompt of
T ids: what `avdit encode --layers K --inputs` needs to time one layer of the real size on a
machine that cannot hold the 50 layers. Plain Python (no numpy); values repeat with a period of
2^20 elements, which changes no timing. The embedding table is cut to --vocab rows (the rows of
the prompt are gathered; the table's size costs nothing else).

    python3 python/qwen3vl_full_size.py OUT_DIR --layers 2 --tokens 300
    avdit encode --model OUT_DIR --layers 1 --inputs OUT_DIR/inputs.safetensors --out s.safetensors
"""
import argparse
import array
import json
import os
import random
import struct

H, F, HEADS, KV, D = 5120, 25600, 64, 8, 128


def bf16_block(std, mean, n=1 << 20, seed=0):
    rnd = random.Random(seed)
    f = array.array("f", (rnd.gauss(mean, std) for _ in range(n))).tobytes()
    # The upper half of each float32: bf16 by truncation (any rounding would do for timing).
    return b"".join(f[i + 2:i + 4] for i in range(0, len(f), 4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--vocab", type=int, default=4096)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    p = "model.language_model."
    shapes = [(p + "embed_tokens.weight", [a.vocab, H], "linear")]
    for i in range(a.layers):
        q = f"{p}layers.{i}."
        shapes += [(q + "input_layernorm.weight", [H], "norm"),
                   (q + "self_attn.q_proj.weight", [HEADS * D, H], "linear"),
                   (q + "self_attn.k_proj.weight", [KV * D, H], "linear"),
                   (q + "self_attn.v_proj.weight", [KV * D, H], "linear"),
                   (q + "self_attn.o_proj.weight", [H, HEADS * D], "linear"),
                   (q + "self_attn.q_norm.weight", [D], "norm"),
                   (q + "self_attn.k_norm.weight", [D], "norm"),
                   (q + "post_attention_layernorm.weight", [H], "norm"),
                   (q + "mlp.gate_proj.weight", [F, H], "linear"),
                   (q + "mlp.up_proj.weight", [F, H], "linear"),
                   (q + "mlp.down_proj.weight", [H, F], "linear")]
    blocks = {"linear": bf16_block(0.02, 0.0, seed=1), "norm": bf16_block(0.1, 1.0, seed=2)}
    header, pos = {}, 0
    for name, shape, _ in shapes:
        n = 2 * shape[0] * (shape[1] if len(shape) > 1 else 1)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [pos, pos + n]}
        pos += n
    hdr = json.dumps(header).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr)
        for name, shape, kind in shapes:
            n = header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
            block = blocks[kind]
            for s in range(0, n, len(block)):
                f.write(block[:min(len(block), n - s)])
    config = {"model_type": "qwen3_vl", "text_config": {
        "attention_bias": False, "head_dim": D, "hidden_act": "silu", "hidden_size": H,
        "intermediate_size": F, "num_attention_heads": HEADS, "num_hidden_layers": 64,
        "num_key_value_heads": KV, "rms_norm_eps": 1e-6, "rope_theta": 5000000,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20],
                         "rope_type": "default"}, "vocab_size": a.vocab}}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    rnd = random.Random(3)
    ids = array.array("q", (rnd.randrange(a.vocab) for _ in range(a.tokens)))
    hdr = json.dumps({"case0.input_ids": {"dtype": "I64", "shape": [1, a.tokens],
                                          "data_offsets": [0, 8 * a.tokens]}}).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(os.path.join(a.out, "inputs.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + ids.tobytes())


if __name__ == "__main__":
    main()
