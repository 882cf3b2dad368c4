"""st_tensors.py -- the tensors of a safetensors folder as raw bytes, for transcripts that compare
exports byte for byte, and what the test quantizers (fp4_quant.py, fp8ct_quant.py, int4ct_quant.py)
share: writing tensors back, copying a folder's other files, the E4M3 code table (pure Python, no
numpy). Used by tests/cli_farr_fp8.sh and the quantizers' transcripts."""
import bisect
import glob
import json
import os
import shutil
import struct


def tensors(folder, want=lambda name: True):
    """{name: (dtype, shape, bytes)} of every tensor in folder/*.safetensors whose name want() takes."""
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, '*.safetensors'))):
        blob = open(path, 'rb').read()
        n = struct.unpack('<Q', blob[:8])[0]
        for name, v in json.loads(blob[8:8 + n]).items():
            if name != '__metadata__' and want(name):
                s, e = v['data_offsets']
                out[name] = (v['dtype'], v['shape'], blob[8 + n + s:8 + n + e])
    return out


def write_tensors(path, items):
    """Writes [(name, (dtype, shape, bytes))] as one safetensors file, in that order."""
    header, blobs, at = {}, [], 0
    for name, (dt, shape, data) in items:
        header[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    h = json.dumps(header).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


def copy_other_files(src, dst):
    """Copies every file of src but its *.safetensors into dst (created)."""
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if not f.endswith('.safetensors'):
            shutil.copy(os.path.join(src, f), dst)


def e4m3(v):
    """The value of F8_E4M3 code v (0x7f / 0xff are NaN and not asked for here)."""
    e, m = (v >> 3) & 15, v & 7
    x = m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -x if v & 0x80 else x


E4M3_POS = [e4m3(c) for c in range(0x7f)]   # increasing: 0 .. 448


def e4m3_code(x):
    """The nearest F8_E4M3 code of x (saturating at 448; ties to the lower magnitude)."""
    a = min(abs(x), 448.0)
    i = bisect.bisect_left(E4M3_POS, a)
    if i == len(E4M3_POS) or (i > 0 and a - E4M3_POS[i - 1] <= E4M3_POS[i] - a):
        i -= 1
    return i | (0x80 if x < 0 else 0)


def f32(x):
    """x rounded to float32."""
    return struct.unpack('<f', struct.pack('<f', x))[0]


def bf16(x):
    """x rounded to bfloat16 (float32 bits + 0x8000, truncated: ties away from zero)."""
    return struct.unpack('<f', struct.pack('<I', (struct.unpack('<I', struct.pack('<f', x))[0] + 0x8000) & 0xffff0000))[0]


def truncation_export_problems(src, ex):
    """What is wrong with the export ex of `truncate vo ... layers 1` on the compressed-tensors
    checkpoint src (hidden 64, 4 heads / 2 KV of 16): an untouched tensor not bit for bit, layer 1's
    o_proj / v_proj not BF16 alone (their scales, packed words, shape dropped) -- q_proj / k_proj too,
    which vLLM fuses with v_proj into one qkv_proj whose shards must be quantized alike
    (core/io/quant_fused.h) --, or not listed in quantization_config.ignore after the source's own
    entries. One message per line; nothing when the export is right."""
    a, b = tensors(src), tensors(ex)
    out = []
    mods = ('k_proj', 'o_proj', 'q_proj', 'v_proj')
    changed = lambda k: any(k.startswith('model.layers.1.self_attn.%s.' % p) for p in mods)
    for k, v in a.items():
        if not changed(k) and b.get(k) != v:
            out.append('untouched tensor differs: ' + k)
    for p, R in (('k_proj', 32), ('o_proj', 64), ('q_proj', 64), ('v_proj', 32)):
        k = 'model.layers.1.self_attn.%s.' % p
        if b.get(k + 'weight', (0, 0))[:2] != ('BF16', [R, 64]):
            out.append('%s is %s' % (k, b.get(k + 'weight', (None, None))[:2]))
        kept = [n for n in b if n.startswith(k) and n != k + 'weight']
        if kept:
            out.append('%s kept %s' % (k, kept))
    q = json.load(open(os.path.join(ex, 'config.json')))['quantization_config']
    listed = json.load(open(os.path.join(src, 'config.json')))['quantization_config']['ignore']
    if q['ignore'] != listed + ['model.layers.1.self_attn.' + p for p in mods]:
        out.append('not listed as unquantized after the source\'s entries: %s' % q)
    return '\n'.join(out)
