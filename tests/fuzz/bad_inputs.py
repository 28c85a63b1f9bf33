#!/usr/bin/env python3
"""Generated hostile inputs for `avdit` (issue 30): hundreds of malformed checkpoints, headers,
indexes, configs, tensors, options and output paths, each run under a timeout. Every case is a
user error, so each must exit 2 with one line on stderr ("avdit: error: ..."), raise no signal,
not hang, and write nothing into the output folder.

    bad_inputs.py AVDIT_BINARY SHARED_DIR [--jobs N] [--timeout S] [--seed N] [--keep DIR]

Only the standard library is used. The case list is deterministic for a seed; --keep leaves the
generated files for a look at a failure.
"""
import argparse
import concurrent.futures
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

HUGE_INTS = [0, -1, 2**31, 2**53 + 1, 2**56 + 1, 2**62, 2**63 - 1, 2**64 - 1]
BAD_VALUES = [-1, 0, 1.5, 10**9, 2**63 - 1, 2**64 - 1, -(2**63), "64", None, [], {}, True, 1e300]


def read_st(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def write_st(path, header, data, raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + data)


class Cases:
    def __init__(self, tmp, avdit, shared, rng):
        self.tmp, self.avdit, self.rng = tmp, avdit, rng
        self.h3 = os.path.join(shared, 'golden', 'h3-tiny')
        self.m2 = os.path.join(shared, 'golden', 'magi2-tiny')
        self.out_dir = os.path.join(tmp, 'out')
        os.makedirs(self.out_dir)
        self.cases = []  # (name, argv)
        self.n = 0

    def path(self, name):
        self.n += 1
        return os.path.join(self.tmp, f'{self.n:04d}_{name}')

    def out(self):
        return os.path.join(self.out_dir, 'o.safetensors')

    def add(self, name, argv):
        self.cases.append((name, [self.avdit] + argv))

    def add_env(self, name, env, argv):
        self.cases.append((name, ['env'] + env + [self.avdit] + argv))

    def gen(self, text=None, model=None, extra=(), family='h3'):
        if family == 'h3':
            model = model or self.h3
            text = text or os.path.join(self.h3, 'inputs.safetensors')
            return ['generate', '--model', model, '--text', text, '--latent-shape', '2,4,6,9', '--steps', '1',
                    '--out', self.out()] + list(extra)
        model = model or self.m2
        text = text or os.path.join(self.m2, 'sampler.safetensors')
        return ['generate', '--model', model, '--text', text, '--latent-shape', '1,2,2,3', '--steps', '1',
                '--out', self.out()] + list(extra)

    # -- safetensors files -------------------------------------------------------------------
    def bad_headers(self, header, data, name):
        """Mutations of one tensor entry of a real header."""
        rng = self.rng
        out = []
        key = rng.choice([k for k in header if k != '__metadata__'])
        e = header[key]
        for v in HUGE_INTS[1:] + [1.5, "3", None, -5]:
            h = json.loads(json.dumps(header))
            shape = list(e['shape']) or [1]
            shape[rng.randrange(len(shape))] = v
            h[key]['shape'] = shape
            out.append((f'shape_{v}', h, data, None))
        h = json.loads(json.dumps(header))
        h[key]['shape'] = list(e['shape']) + [0, 2**63 - 1]
        out.append(('zero_and_huge', h, data, None))
        h = json.loads(json.dumps(header))
        h[key]['shape'] = [2**53 + 1, 64]
        out.append(('wrap_2^53', h, data, None))
        h = json.loads(json.dumps(header))
        h[key]['shape'] = [2**31, 2**31]
        out.append(('square_2^31', h, data, None))
        for off in ([0, 2**64 - 1], [5, 3], [-1, 4], [0], "0,4", [0.5, 4], [2**63, 2**63 + 4]):
            h = json.loads(json.dumps(header))
            h[key]['data_offsets'] = off
            out.append((f'offsets_{off}', h, data, None))
        for dt in ('F31', 'E2M1', '', 7, None, 'f32'):
            h = json.loads(json.dumps(header))
            h[key]['dtype'] = dt
            out.append((f'dtype_{dt}', h, data, None))
        h = json.loads(json.dumps(header))
        h['__metadata__'] = {'a': 1}
        out.append(('metadata_int', h, data, None))
        h = json.loads(json.dumps(header))
        h[key] = [1, 2]
        out.append(('entry_array', h, data, None))
        out.append(('truncated_data', header, data[:len(data) // 2], None))
        out.append(('trailing_data', header, data + b'\0' * 8, None))
        out.append(('deep_header', None, data, b'{"__metadata__": {"a": ' + b'[' * 200000 + b']' * 200000 + b'}}'))
        out.append(('header_not_object', None, data, b'[1, 2, 3]'))
        out.append(('header_garbage', None, data, b'{"x": \xff\xfe}'))
        out.append(('number_overflow', None, data, b'{"x": {"dtype": "F32", "shape": [1e99999], "data_offsets": [0, 4]}}'))
        return [(f'{name}_{m}', h, d, raw) for m, h, d, raw in out]

    def safetensors_files(self):
        sources = [(os.path.join(self.h3, 'inputs.safetensors'), 'h3inputs'),
                   (os.path.join(self.h3, 'sampler.safetensors'), 'h3sampler'),
                   (os.path.join(self.m2, 'sampler.safetensors'), 'm2sampler')]
        files = []
        for src, name in sources:
            header, data = read_st(src)
            for case, h, d, raw in self.bad_headers(header, data, name):
                p = self.path(case + '.safetensors')
                write_st(p, h, d, raw)
                files.append((case, p))
        for case, content in (('empty', b''), ('short', b'\x08\0\0'), ('len_huge', b'\xff' * 8 + b'{}'),
                              ('len_past_end', struct.pack('<Q', 4096) + b'{}'),
                              ('len_100MB', struct.pack('<Q', 100_000_001) + b'{' + b' ' * 64)):
            p = self.path(case + '.safetensors')
            open(p, 'wb').write(content)
            files.append((case, p))
        # Names with a newline and a terminal escape: the message must stay one line.
        p = self.path('newline_names.safetensors')
        write_st(p, {'x\ny\x1b[31m': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]},
                     'z': {'dtype': 'F32\n', 'shape': [1], 'data_offsets': [4, 8]}}, b'\0' * 8)
        files.append(('newline_names', p))
        fifo = self.path('fifo.safetensors')
        os.mkfifo(fifo)
        files.append(('fifo', fifo))
        files.append(('folder', self.tmp))
        files.append(('missing', os.path.join(self.tmp, 'missing.safetensors')))
        return files

    def file_cases(self):
        files = self.safetensors_files()
        for case, p in files:
            self.add(f'text:{case}', self.gen(text=p))
            self.add(f'inputs:{case}', ['forward', '--model', self.h3, '--inputs', p, '--out', self.out()])
        for case, p in self.rng.sample(files, 25):
            self.add(f'noise:{case}', ['generate', '--model', self.h3, '--text',
                                       os.path.join(self.h3, 'inputs.safetensors'), '--noise', p, '--steps', '1',
                                       '--out', self.out()])
            self.add(f'teacher:{case}', self.gen(extra=['--teacher', p]))
            self.add(f'inspect:{case}', ['inspect', p])
            self.add(f'negative:{case}', self.gen(family='magi2', extra=['--negative', p]))
        # The same files as a model's weights.
        for case, p in self.rng.sample(files, 20):
            d = self.path('model_' + case)
            os.makedirs(d)
            shutil.copy(os.path.join(self.h3, 'config.json'), d)
            if os.path.exists(p) or case == 'fifo':
                os.symlink(p, os.path.join(d, 'model.safetensors'))
            self.add(f'weights:{case}', self.gen(model=d))
        # A real model file with one tensor's shape changed, so the model sees an unexpected shape.
        header, data = read_st(os.path.join(self.h3, 'model.safetensors'))
        keys = sorted(k for k in header if k != '__metadata__')
        for i in range(12):
            h = json.loads(json.dumps(header))
            k = self.rng.choice(keys)
            e = h[k]
            if len(e['shape']) >= 2:
                e['shape'] = [e['shape'][1], e['shape'][0]]
            else:
                e['shape'] = e['shape'] + [1, 1]
            d = self.path(f'reshaped_{i}')
            os.makedirs(d)
            shutil.copy(os.path.join(self.h3, 'config.json'), d)
            write_st(os.path.join(d, 'model.safetensors'), h, data)
            self.add(f'reshaped:{k}', self.gen(model=d))

    # -- NaN / Inf in tensors -----------------------------------------------------------------
    def nan_cases(self):
        specs = [(os.path.join(self.h3, 'inputs.safetensors'), 'text_embeds', 'text'),
                 (os.path.join(self.h3, 'inputs.safetensors'), 'video_latent', 'inputs'),
                 (os.path.join(self.h3, 'inputs.safetensors'), 'audio_latent', 'inputs'),
                 (os.path.join(self.h3, 'inputs.safetensors'), 'sigma_video', 'inputs'),
                 (os.path.join(self.h3, 'sampler.safetensors'), 'noise_video', 'noise'),
                 (os.path.join(self.h3, 'sampler.safetensors'), 'noise_audio', 'noise'),
                 (os.path.join(self.m2, 'sampler.safetensors'), 'txt_feat', 'm2text'),
                 (os.path.join(self.m2, 'sampler.safetensors'), 'null_txt_feat', 'm2negative'),
                 (os.path.join(self.m2, 'inputs.safetensors'), 'txt_feat', 'm2inputs'),
                 (os.path.join(self.m2, 'inputs.safetensors'), 'time_embedding_freqs', 'm2freqs')]
        for src, tensor, use in specs:
            header, data = read_st(src)
            e = header[tensor]
            s, t = e['data_offsets']
            for value in (float('nan'), float('inf'), float('-inf')):
                for where in ('first', 'last', 'random'):
                    n = (t - s) // 4
                    i = 0 if where == 'first' else n - 1 if where == 'last' else self.rng.randrange(n)
                    d = bytearray(data)
                    d[s + 4 * i:s + 4 * i + 4] = struct.pack('<f', value)
                    p = self.path(f'{tensor}_{value}_{where}.safetensors')
                    write_st(p, header, bytes(d))
                    self.add_nan_use(use, p, f'{tensor}:{value}:{where}')
        # The same values in 16-bit dtypes.
        header, data = read_st(os.path.join(self.h3, 'inputs.safetensors'))
        for dt, bits in (('F16', (0x7e00, 0x7c00, 0xfc00)), ('BF16', (0x7fc0, 0x7f80, 0xff80))):
            for b in bits:
                h = {'text_embeds': {'dtype': dt, 'shape': [8, 64], 'data_offsets': [0, 1024]}}
                d = bytearray(1024)
                d[10:12] = struct.pack('<H', b)
                p = self.path(f'text_{dt}_{b:x}.safetensors')
                write_st(p, h, bytes(d))
                self.add(f'text {dt} {b:#x}', self.gen(text=p))

    def add_nan_use(self, use, p, name):
        if use == 'text':
            self.add(f'nan text {name}', self.gen(text=p))
        elif use == 'inputs':
            self.add(f'nan inputs {name}', ['forward', '--model', self.h3, '--inputs', p, '--out', self.out()])
        elif use == 'noise':
            self.add(f'nan noise {name}', ['generate', '--model', self.h3, '--text',
                                           os.path.join(self.h3, 'inputs.safetensors'), '--noise', p, '--steps', '1',
                                           '--out', self.out()])
        elif use == 'm2text':
            self.add(f'nan m2 text {name}', self.gen(family='magi2', text=p))
        elif use == 'm2negative':
            self.add(f'nan m2 negative {name}', self.gen(family='magi2', extra=['--negative', p]))
        elif use == 'm2inputs':
            self.add(f'nan m2 inputs {name}', ['forward', '--model', self.m2, '--inputs', p, '--out', self.out()])
        elif use == 'm2freqs':
            self.add(f'nan m2 freqs {name}', self.gen(family='magi2', extra=['--time-embedding-freqs', p]))

    # -- configs ------------------------------------------------------------------------------
    def config_cases(self):
        for family, src in (('h3', self.h3), ('magi2', self.m2)):
            base = json.load(open(os.path.join(src, 'config.json')))
            fields = []
            if family == 'h3':
                fields = [(k,) for k, v in base.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
                fields.append(('patch_size', 0))
            else:
                # Fields where every BAD_VALUE is wrong for this checkpoint (attn_softcap -1, route_scale 1.5 or
                # a null, which means "the reference default", can be valid).
                for k in ('num_layers', 'hidden_size', 'head_dim', 'num_query_groups', 'video_in_channels',
                          'audio_in_channels', 'text_in_channels', 'mm_layers'):
                    fields.append(('arch_config', k))
                for k in ('num_experts', 'num_heads', 'expert_intermediate_size', 'moe_layers'):
                    fields.append(('arch_config', 'moe_config', k))
                fields += [('arch_config', 'mhc_config', 'num_stream'),
                           ('evaluation_config', 'data_proxy_config', 'patch_size')]
            for path in fields:
                values = [v for v in BAD_VALUES if family == 'h3' or v is not None]
                for value in self.rng.sample(values, 5):
                    cfg = json.loads(json.dumps(base))
                    node = cfg
                    for k in path[:-1]:
                        node = node[k]
                    node[path[-1]] = value
                    self.add_config(family, src, cfg, f'{".".join(map(str, path))}={json.dumps(value)}')
            # String fields given other types (nlohmann's value() / get<string>() would throw raw).
            # (H3's only string, _class_name, may be anything: H3 is also detected by its fields.)
            strings = [] if family == 'h3' else [
                ('arch_config', 'params_dtype'), ('arch_config', 'activation_type'),
                ('arch_config', 'moe_config', 'score_func'),
                ('evaluation_config', 'data_proxy_config', 'spatial_rope_interpolation')]
            for path in strings:
                for value in (5, [], {}, True, 'nope'):
                    cfg = json.loads(json.dumps(base))
                    node = cfg
                    for k in path[:-1]:
                        node = node[k]
                    node[path[-1]] = value
                    self.add_config(family, src, cfg, f'{".".join(path)}={json.dumps(value)}')
            for name, text in (('deep', '[' * 300000 + ']' * 300000), ('array', '[1, 2]'), ('string', '"h3"'),
                               ('truncated', '{"hidden_size": 1'), ('nan_literal', '{"hidden_size": NaN}'),
                               ('bom', '\ufeff{}'), ('empty', '')):
                self.add_config(family, src, None, name, raw=text)

    def add_config(self, family, src, cfg, name, raw=None):
        d = self.path(f'config_{family}')
        os.makedirs(d)
        with open(os.path.join(d, 'config.json'), 'w') as f:
            f.write(raw if raw is not None else json.dumps(cfg))
        os.symlink(os.path.join(src, 'model.safetensors'), os.path.join(d, 'model.safetensors'))
        self.add(f'config {family} {name}', self.gen(model=d, family='h3' if family == 'h3' else 'magi2'))
        if self.rng.random() < 0.3 and name != 'bom':  # a BOM then {} is valid JSON: inspect shows it
            self.add(f'inspect config {family} {name}', ['inspect', os.path.join(d, 'config.json')])

    # -- shard indexes ------------------------------------------------------------------------
    def index_cases(self):
        header, _ = read_st(os.path.join(self.h3, 'model.safetensors'))
        names = [k for k in header if k != '__metadata__']
        outside = self.path('outside')
        os.makedirs(outside)
        shutil.copy(os.path.join(self.h3, 'model.safetensors'), outside)
        secret = os.path.join(outside, 'secret.bin')
        open(secret, 'wb').write(b'SECRET!!' * 8)
        shards = ['../outside/model.safetensors', '/etc/passwd', secret, 'sub/../../outside/model.safetensors',
                  './../outside/model.safetensors', 'link_out.safetensors', 'dirlink/model.safetensors', '',
                  'missing.safetensors', 'fifo.safetensors', 'sub', '..', '.', '/', 'a\\..\\..\\b', 'x\ny\x1b[2J',
                  os.path.join('..', os.path.basename(outside), 'secret.bin')]
        for shard in shards:
            d = self.path('index')
            os.makedirs(os.path.join(d, 'sub'))
            shutil.copy(os.path.join(self.h3, 'config.json'), d)
            os.symlink(os.path.join(outside, 'model.safetensors'), os.path.join(d, 'link_out.safetensors'))
            os.symlink(outside, os.path.join(d, 'dirlink'))
            os.mkfifo(os.path.join(d, 'fifo.safetensors'))
            with open(os.path.join(d, 'model.safetensors.index.json'), 'w') as f:
                json.dump({'weight_map': {n: shard for n in names}}, f)
            self.add(f'index shard {shard!r}', self.gen(model=d))
            self.add(f'index inspect {shard!r}', ['inspect', os.path.join(d, 'model.safetensors.index.json')])
        for name, content in (('no_weight_map', {}), ('weight_map_list', {'weight_map': [1]}),
                              ('value_int', {'weight_map': {names[0]: 3}}), ('deep', None),
                              ('tensor_absent', {'weight_map': {'nope': 'model.safetensors'}})):
            d = self.path('index_' + name)
            os.makedirs(d)
            shutil.copy(os.path.join(self.h3, 'config.json'), d)
            shutil.copy(os.path.join(self.h3, 'model.safetensors'), os.path.join(d, 'w.safetensors'))
            with open(os.path.join(d, 'model.safetensors.index.json'), 'w') as f:
                f.write('[' * 100000 + ']' * 100000 if content is None else
                        json.dumps(content).replace('model.safetensors', 'w.safetensors'))
            self.add(f'index {name}', self.gen(model=d))

    # -- options ------------------------------------------------------------------------------
    def option_cases(self):
        for opt in ('--guidance', '--video-guidance', '--audio-guidance', '--shift'):
            for v in ('nan', '-nan', 'inf', '-inf', 'NaN', 'INFINITY', '1e999', '-1e999', 'x', ''):
                self.add(f'{opt} {v}', self.gen(extra=[opt, v]))
        for v in ('18446744073709551616', '-1', '1e3', '99999999999999999999999', 'seed', ''):
            self.add(f'--seed {v}', self.gen(extra=['--seed', v]))
        for v in ('0', '-1', '10001', '2147483648', '1e3', 'x'):
            argv = self.gen()
            argv[argv.index('--steps') + 1] = v
            self.add(f'--steps {v}', argv)
        for v in ('0,4,6,9', '-2,4,6,9', '2,4,6', '2,4,6,9,1', 'a,b,c,d', '2,4,6,9999999999999999999',
                  '4000000000,4000000000,4000000000,9', '2000,4000,6000,9', ',,,', '2,4,6,0', '2,4,6,9x'):
            argv = self.gen()
            argv[argv.index('--latent-shape') + 1] = v
            self.add(f'--latent-shape {v}', argv)
            argv = self.gen(family='magi2')
            argv[argv.index('--latent-shape') + 1] = v
            self.add(f'magi2 --latent-shape {v}', argv)
        for f, h, w in (('0', '64', '64'), ('17', '-32', '64'), ('9999999', '99999', '99999'),
                        ('17', '33', '64'), ('x', '64', '64'), ('17', '9223372036854775807', '64')):
            argv = self.gen()
            i = argv.index('--latent-shape')
            argv[i:i + 2] = ['--frames', f, '--height', h, '--width', w]
            self.add(f'--frames {f} --height {h} --width {w}', argv)
        argv = self.gen(extra=['--save-trajectory', os.path.join(self.out_dir, 't.safetensors')])
        argv[argv.index('--latent-shape') + 1] = '90,64,64,9'
        argv[argv.index('--steps') + 1] = '10000'
        self.add('trajectory too large for memory', argv)
        self.add('--device', self.gen(extra=['--device', 'tpu']))
        for v in ('0', '-3', '1025', 'two'):
            self.add_env(f'AVDIT_THREADS={v}', [f'AVDIT_THREADS={v}'], self.gen())

    # -- outputs ------------------------------------------------------------------------------
    def output_cases(self):
        copy = self.path('copy')
        os.makedirs(copy)
        for f in ('config.json', 'model.safetensors', 'inputs.safetensors', 'sampler.safetensors'):
            shutil.copy(os.path.join(self.h3, f), copy)
        os.link(os.path.join(copy, 'sampler.safetensors'), os.path.join(copy, 'hardlink.safetensors'))
        os.symlink(os.path.join(copy, 'inputs.safetensors'), os.path.join(copy, 'symlink.safetensors'))
        fifo = os.path.join(copy, 'fifo')
        os.mkfifo(fifo)
        c = lambda f: os.path.join(copy, f)
        base = ['generate', '--model', copy, '--text', c('inputs.safetensors'), '--noise', c('sampler.safetensors'),
                '--steps', '1']
        targets = [c('model.safetensors'), c('inputs.safetensors'), c('sampler.safetensors'), c('config.json'),
                   c('hardlink.safetensors'), c('symlink.safetensors'), copy, copy + '/', fifo,
                   os.path.join(copy, 'missing', 'x.safetensors'), c('config.json') + '/x', '/sys/avdit.safetensors',
                   '/proc/avdit.safetensors', os.path.join(self.out_dir, '.'), os.path.join(self.out_dir, '..')]
        for t in targets:
            for opt in ('--out', '--save-trajectory'):
                self.add(f'{opt} {t}', base + [opt, t])
            if t not in (c('sampler.safetensors'), c('hardlink.safetensors')):  # not inputs of forward
                self.add(f'forward --out {t}', ['forward', '--model', copy, '--inputs', c('inputs.safetensors'),
                                                '--out', t])
        self.add('--out == --save-trajectory', base + ['--out', self.out(), '--save-trajectory', self.out()])
        self.copy = copy

    def all(self):
        self.file_cases()
        self.nan_cases()
        self.config_cases()
        self.index_cases()
        self.option_cases()
        self.output_cases()
        return self.cases


def run_case(case, timeout, out_dir):
    name, argv = case
    try:
        p = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f'{name}: hung (killed after {timeout} s)'
    err = p.stderr.decode(errors='replace').strip()
    if p.returncode < 0:
        return f'{name}: killed by signal {-p.returncode}: {err[-300:]}'
    if p.returncode != 2:
        return f'{name}: exit {p.returncode}, expected 2: {err[-300:]}'
    lines = err.splitlines()
    if len(lines) != 1 or not lines[0].startswith('avdit: error: '):
        return f'{name}: expected one "avdit: error:" line, got: {err[-300:]}'
    if 'SECRET' in err or 'root:x:0' in err:
        return f'{name}: quoted a file outside the model folder: {err[-300:]}'
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('avdit')
    ap.add_argument('shared')
    ap.add_argument('--jobs', type=int, default=2)
    ap.add_argument('--timeout', type=float, default=60)
    ap.add_argument('--seed', type=int, default=30)
    ap.add_argument('--keep')
    args = ap.parse_args()
    tmp = args.keep or tempfile.mkdtemp(prefix='avdit-bad-')
    os.makedirs(tmp, exist_ok=True)
    try:
        gen = Cases(tmp, os.path.abspath(args.avdit), os.path.abspath(args.shared), random.Random(args.seed))
        cases = gen.all()
        sums = {f: open(os.path.join(gen.copy, f), 'rb').read() for f in os.listdir(gen.copy)
                if f.endswith('.safetensors') or f.endswith('.json')}
        failures = []
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for r in pool.map(lambda c: run_case(c, args.timeout, gen.out_dir), cases):
                if r:
                    failures.append(r)
        left = os.listdir(gen.out_dir)
        if left:
            failures.append(f'files written into the output folder: {left}')
        for f, b in sums.items():
            if open(os.path.join(gen.copy, f), 'rb').read() != b:
                failures.append(f'input {f} was changed by an --out / --save-trajectory case')
        stray = [f for f in os.listdir(gen.copy) if f.endswith('.tmp')]
        if stray:
            failures.append(f'temporary files left beside the inputs: {stray}')
        for f in failures:
            print('FAIL', f)
        print(f'{len(cases)} bad inputs: {len(cases) - len(failures)} refused with exit 2 and one line, '
              f'{len(failures)} failures')
        return 1 if failures else 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
