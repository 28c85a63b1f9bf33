#!/usr/bin/env python3
"""Peer of `avdit bench text`: transformers' own text model on the same config with
num_hidden_layers cut to the layers the pipeline uses, random bf16 weights made on the GPU, SDPA
attention, batch 1, no cache: Qwen3VLTextModel (what MiniMax-H3's encoder wraps; 50 layers) or
Qwen3_5TextModel (what MAGI-2's encoder instantiates; 62 layers, Gated DeltaNet through
flash-linear-attention when installed, else transformers' torch fallback, which is printed). The
median time of one forward of a --tokens prompt (CUDA-synchronised wall clock, the hidden states
copied to the host as avdit's encode does).

Usage: text_peer.py --config CONFIG.json [--encoder qwen3vl|qwen35] [--layers N]
                    [--tokens 300,1000] [--iters 5] [--json F]
"""
import argparse
import importlib.util
import json
import statistics
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--encoder", default="qwen3vl", choices=["qwen3vl", "qwen35"])
    p.add_argument("--layers", type=int, default=0)
    p.add_argument("--tokens", default="300")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--json")
    a = p.parse_args()

    import transformers
    tc = json.load(open(a.config))["text_config"]
    a.layers = a.layers or (62 if a.encoder == "qwen35" else 50)
    tc["num_hidden_layers"] = a.layers
    if a.encoder == "qwen35":
        from transformers.models.qwen3_5 import modeling_qwen3_5 as m
        from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig as Config
        Model = m.Qwen3_5TextModel
        tc["layer_types"] = tc["layer_types"][: a.layers]
        fla = importlib.util.find_spec("fla") is not None
        print(f"Gated DeltaNet: {'flash-linear-attention' if fla else 'torch fallback (fla not installed)'}")
    else:
        from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig as Config
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextModel as Model
    cfg = Config(**tc)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    t0 = time.time()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = Model(cfg).eval()
    torch.cuda.synchronize()
    weights = sum(t.numel() * t.element_size() for t in model.parameters())
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: "
          f"{a.layers} layers, weights {weights / 1e9:.2f} GB made in {time.time() - t0:.1f} s")
    rows = []
    for T in [int(x) for x in a.tokens.split(",")]:
        ids = ((torch.arange(T, device="cuda") * 7919 + 13) % cfg.vocab_size).view(1, T)
        ms = []
        with torch.inference_mode():
            for i in range(a.warmup + a.iters):
                torch.cuda.synchronize()
                s = time.perf_counter()
                out = model(input_ids=ids, use_cache=False).last_hidden_state
                out = out.float().cpu()
                if i >= a.warmup:
                    ms.append((time.perf_counter() - s) * 1e3)
        med = statistics.median(ms)
        rows.append({"tokens": T, "layers": a.layers, "encode ms": round(med, 2),
                     "min ms": round(min(ms), 2), "tokens/s": round(T / (med / 1e3))})
        print(f"| {T} | {a.layers} | {med:.2f} | {min(ms):.2f} | {T / (med / 1e3):.0f} |")
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
