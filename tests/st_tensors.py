"""st_tensors.py -- the tensors of a safetensors folder as raw bytes, for transcripts that compare
exports byte for byte (pure Python, no numpy). Used by tests/cli_farr_fp8.sh."""
import glob
import json
import os
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
