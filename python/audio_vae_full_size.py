"""The two audio VAE decoders at their release width with random float32 weights, plus 10 seconds
of latents: what `avdit decode --latents` needs to time the real size on the CPU.

  sa: Stable Audio Open (MAGI-2 audio): model_config.json (the production pretransform from the
      golden's config.json) + model.safetensors under the reference's `decoder.*` names; latents
      [250, 64] (25 frames/s).
  h3: MiniMax-H3 audio VAE: config.json of the release (../shared/reference-configs) +
      model.safetensors (decoder_dim 1024, latent_dim 2048); latents [2, 32, 400] (40 frames/s).

Plain Python (no numpy); values repeat with a period of 2^20 elements, which changes no timing.
Weight-norm gains are set so the activations stay near unit scale.

    python3 python/audio_vae_full_size.py sa /tmp/sa-full --shared ../shared
    avdit decode --model /tmp/sa-full --latents /tmp/sa-full/latents.safetensors --out a.wav
"""
import argparse
import array
import json
import math
import os
import random
import struct

BLOCK = 1 << 20


def gauss_block(seed):
    rnd = random.Random(seed)
    return array.array("f", (rnd.gauss(0.0, 1.0) for _ in range(BLOCK)))


def write_safetensors(path, tensors):
    """tensors: [(name, shape, kind)] with kind 'n' (N(0,1)), ('c', value) or ('s', scale)."""
    base = gauss_block(1)
    header, pos = {}, 0
    for name, shape, _ in tensors:
        n = math.prod(shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [pos, pos + 4 * n]}
        pos += 4 * n
    hdr = json.dumps(header).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr)
        for name, shape, kind in tensors:
            n = math.prod(shape)
            if kind[0] == "c":
                f.write(array.array("f", [kind[1]] * n).tobytes())
                continue
            scale = kind[1] if kind[0] == "s" else 1.0
            block = array.array("f", (v * scale for v in base)) if scale != 1.0 else base
            while n > 0:
                take = min(n, BLOCK)
                f.write(block[:take].tobytes())
                n -= take


def wn(p, shape, fan, per_row, gain=1.0):
    """weight_g so that w = g v / |v| has std gain / sqrt(fan): |v| ~ sqrt(per_row)."""
    g = gain / math.sqrt(fan) * math.sqrt(per_row)
    return [(p + "_g", [shape[0], 1, 1], ("c", g)), (p + "_v", shape, ("n",))]


def snake(p, c):
    return [(p + ".alpha", [c], ("c", 0.0)), (p + ".beta", [c], ("c", 0.0))]


def sa(out, shared):
    cfg = json.load(open(os.path.join(shared, "golden/vae-sa-audio-tiny/config.json")))
    pre = cfg["production_pretransform"]
    dec = pre["decoder"]["config"]
    C, mult, strides = dec["channels"], [1] + dec["c_mults"], dec["strides"]
    t = []
    top = mult[-1] * C
    t += wn("decoder.layers.0.weight", [top, dec["latent_dim"], 7], dec["latent_dim"] * 7, dec["latent_dim"] * 7)
    t += [("decoder.layers.0.bias", [top], ("c", 0.0))]
    layer = 1
    for i in range(len(mult) - 1, 0, -1):
        cin, cout, s = mult[i] * C, mult[i - 1] * C, strides[i - 1]
        p = f"decoder.layers.{layer}"
        t += snake(p + ".layers.0", cin)
        t += wn(p + ".layers.1.weight", [cin, cout, 2 * s], cin * 2, cout * 2 * s)
        t += [(p + ".layers.1.bias", [cout], ("c", 0.0))]
        for j in range(3):
            q = f"{p}.layers.{2 + j}"
            t += snake(q + ".layers.0", cout)
            t += wn(q + ".layers.1.weight", [cout, cout, 7], cout * 7, cout * 7)
            t += [(q + ".layers.1.bias", [cout], ("c", 0.0))] + snake(q + ".layers.2", cout)
            t += wn(q + ".layers.3.weight", [cout, cout, 1], cout, cout, 0.3)
            t += [(q + ".layers.3.bias", [cout], ("c", 0.0))]
        layer += 1
    t += snake(f"decoder.layers.{layer}", C)
    t += wn(f"decoder.layers.{layer + 1}.weight", [dec["out_channels"], C, 7], C * 7, C * 7, 0.4)
    os.makedirs(out, exist_ok=True)
    mc = {"model_type": "diffusion_cond", "sample_rate": pre["sample_rate"],
          "model": {"pretransform": {"type": "autoencoder", "config": pre}}}
    json.dump(mc, open(os.path.join(out, "model_config.json"), "w"), indent=1)
    write_safetensors(os.path.join(out, "model.safetensors"), t)
    write_safetensors(os.path.join(out, "latents.safetensors"), [("audio_latents", [250, 64], ("n",))])


def h3(out, shared):
    cfg = json.load(open(os.path.join(shared, "reference-configs/h3/FL2VA/audio_vae/config.json")))
    D, latent, lc = 1024, 2048, cfg["latent_channels"]
    rates, kernels = [5, 5, 2, 2, 2, 2, 2], [9, 9, 4, 4, 4, 4, 4]
    kaiser = [1.0 / 12] * 12  # any 12-tap filter times the same as kaiser-sinc

    def wnp(p, shape, fan, per_row, gain=1.0):
        g = gain / math.sqrt(fan) * math.sqrt(per_row)
        return [(p + ".parametrizations.weight.original0", [shape[0], 1, 1], ("c", g)),
                (p + ".parametrizations.weight.original1", shape, ("n",))]

    def act(p, c):
        return [(p + ".act.alpha", [c], ("c", 0.0)), (p + ".act.beta", [c], ("c", 0.0)),
                (p + ".upsample.filter", [1, 1, 12], ("c", kaiser[0])),
                (p + ".downsample.lowpass.filter", [1, 1, 12], ("c", kaiser[0]))]

    t = [("dec_in_proj.weight", [latent, lc, 1], ("s", 1 / math.sqrt(lc))),
         ("dec_in_proj.bias", [latent], ("c", 0.0))]
    t += wnp("decoder.conv_pre", [D, latent, 7], latent * 7, latent * 7)
    t += [("decoder.conv_pre.bias", [D], ("c", 0.0))]
    ch = D
    for i in range(7):
        p = f"decoder.ups.{i}.0"
        t += wnp(p, [ch, ch // 2, kernels[i]], ch * kernels[i] / rates[i], ch // 2 * kernels[i], 0.85)
        t += [(p + ".bias", [ch // 2], ("c", 0.0))]
        ch //= 2
        for j, k in enumerate([3, 7, 11]):
            q = f"decoder.resblocks.{3 * i + j}"
            for n in range(3):
                t += wnp(f"{q}.convs1.{n}", [ch, ch, k], ch * k, ch * k)
                t += [(f"{q}.convs1.{n}.bias", [ch], ("c", 0.0))]
                t += wnp(f"{q}.convs2.{n}", [ch, ch, k], ch * k, ch * k, 0.3)
                t += [(f"{q}.convs2.{n}.bias", [ch], ("c", 0.0))]
            for n in range(6):
                t += act(f"{q}.activations.{n}", ch)
    t += act("decoder.activation_post", ch)
    t += wnp("decoder.conv_post", [1, ch, 7], ch * 7, ch * 7, 0.3)
    os.makedirs(out, exist_ok=True)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    write_safetensors(os.path.join(out, "model.safetensors"), t)
    write_safetensors(os.path.join(out, "latents.safetensors"), [("latents", [2, lc, 400], ("n",))])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("family", choices=["sa", "h3"])
    ap.add_argument("out")
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "../../shared"))
    a = ap.parse_args()
    (sa if a.family == "sa" else h3)(a.out, a.shared)


if __name__ == "__main__":
    main()
