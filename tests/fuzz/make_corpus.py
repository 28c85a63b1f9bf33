#!/usr/bin/env python3
"""Writes the fuzzers' committed seeds, tests/fuzz/corpus/<target>/ (small, hand-made files and the
tiny golden configs), from the shared fixtures beside the repo. Rerun after changing a target's
input format:  tests/fuzz/make_corpus.py [SHARED_DIR]  (default ../shared).
Files named regress_* are inputs a fuzzer once crashed on, kept as seeds; this script leaves them."""
import json
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, '..', '..', '..', 'shared')
corpus = os.path.join(here, 'corpus')


def st(tensors, metadata=None):
    """safetensors bytes of {name: (dtype, shape, data)}."""
    header, data, off = {}, b'', 0
    if metadata:
        header['__metadata__'] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [off, off + len(raw)]}
        data += raw
        off += len(raw)
    h = json.dumps(header).encode()
    h += b' ' * (-len(h) % 8)
    return struct.pack('<Q', len(h)) + h + data


def f32(*values):
    return struct.pack(f'<{len(values)}f', *values)


def put(target, name, content):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb' if isinstance(content, bytes) else 'w') as f:
        f.write(content)


for target in os.listdir(corpus) if os.path.isdir(corpus) else []:
    for name in os.listdir(os.path.join(corpus, target)):
        if not name.startswith('regress_'):
            os.remove(os.path.join(corpus, target, name))
put('safetensors_header_fuzz', 'f32_2x3', st({'x': ('F32', [2, 3], f32(*range(6)))}))
put('safetensors_header_fuzz', 'mixed_metadata', st({'a': ('BF16', [2, 2], b'\x80\x3f' * 4), 'b': ('I64', [1], b'\x07' + b'\0' * 7),
                                                      'c': ('F8_E4M3', [], b'\x38')}, {'format': 'pt'}))
put('safetensors_header_fuzz', 'empty_tensor', st({'e': ('F32', [0, 5], b''), 'u': ('U8', [3], b'abc')}))
put('safetensors_header_fuzz', 'bool_f16_f64', st({'m': ('BOOL', [2], b'\x01\x00'), 'h': ('F16', [1], b'\x00\x3c'),
                                                    'd': ('F64', [1], struct.pack('<d', 2.5))}))
put('safetensors_header_fuzz', 'empty_header', struct.pack('<Q', 2) + b'{}')
for name, shard in (('two_shards', {'a': 'a.safetensors', 'b': 'sub/b.safetensors'}), ('symlink_in', {'a': 'in.safetensors'}),
                    ('symlink_out', {'x': 'out.safetensors'}), ('up', {'x': '../outside/x.safetensors'}),
                    ('dir_link', {'x': 'outdir/x.safetensors'}), ('fifo', {'a': 'fifo.safetensors'})):
    put('index_fuzz', name, json.dumps({'metadata': {'total_size': 8}, 'weight_map': shard}))
for src, name in ((os.path.join(shared, 'golden', 'h3-tiny', 'config.json'), 'h3_tiny'),
                  (os.path.join(shared, 'golden', 'magi2-tiny', 'config.json'), 'magi2_tiny'),
                  (os.path.join(shared, 'reference-configs', 'h3', 'FL2VA', 'transformer', 'config.json'), 'h3_official'),
                  (os.path.join(shared, 'reference-configs', 'magi2', 'magi2_preview.json'), 'magi2_preview')):
    put('config_fuzz', name, json.dumps(json.load(open(src)), separators=(',', ':')))
put('inputs_fuzz', 'text', st({'text_embeds': ('F32', [2, 4], f32(*[0.5] * 8))}))
put('inputs_fuzz', 'txt_feat_bf16', st({'txt_feat': ('BF16', [1, 2, 2], b'\x80\x3f' * 4)}))
put('inputs_fuzz', 'noise', st({'noise_video': ('F32', [1, 2, 1, 2, 2], f32(*[0.25] * 8)),
                                'noise_audio': ('F32', [2, 1, 3], f32(*[1.0] * 6))}))
put('inputs_fuzz', 'trajectory', st({'latents_video': ('F32', [3, 1, 2], f32(*range(6))),
                                     'latents_audio': ('F32', [3, 2], f32(*range(6))),
                                     'velocity_video': ('F32', [2, 1, 2], f32(*range(4))),
                                     'velocity_audio': ('F32', [2, 2], f32(*range(4)))}))
print('wrote', sum(len(fs) for _, _, fs in os.walk(corpus)), 'seeds into', corpus)
