"""st_tensors.py -- the tensors of a safetensors folder as raw bytes, for transcripts that compare
exports byte for byte, and what the test quantizers (fp4_quant.py, fp8ct_quant.py, int4ct_quant.py)
share: writing tensors back, copying a folder's other files, the E4M3 code table (pure Python, no
numpy). Used by tests/cli_farr_fp8.sh and the quantizers' transcripts."""
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
