"""oss_mxfp4_quant.py -- a gpt_oss checkpoint (F32, `synth family gpt_oss`) with every layer's stacked
experts written in MXFP4 as gpt-oss releases them (tensor.h: "<p>_blocks" U8 [E, B, A/32, 16] and
"<p>_scales" U8 [E, B, A/32], E8M0, for the parameter P [E, A, B] used as x @ P, so the blocks are
transposed relative to it; the low nibble is the even element) and gpt-oss's quantization_config, for
tests/cli_oss_mxfp4.sh (pure Python, no numpy).

    python3 oss_mxfp4_quant.py SRC DST [list-experts]

list-experts also lists "model.layers.*.mlp.experts" in modules_to_not_convert (a config that
contradicts its tensors).
"""
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_tensors import copy_other_files, tensors, write_tensors  # noqa: E402

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def enc(x):
    i = min(range(8), key=lambda k: abs(E2M1[k] - abs(x)))
    return i | (8 if x < 0 and i else 0)


def pack(vals, E, A, B):
    blk, sc = bytearray(), bytearray()
    for e in range(E):
        for b in range(B):
            col = [vals[e * A * B + a * B + b] for a in range(A)]
            for g in range(A // 32):
                grp = col[g * 32:(g + 1) * 32]
                ex = math.ceil(math.log2((max(abs(v) for v in grp) or 1.0) / 6))
                sc.append(ex + 127)
                codes = [enc(v / 2.0 ** ex) for v in grp]
                blk += bytes(codes[2 * k] | (codes[2 * k + 1] << 4) for k in range(16))
    return bytes(blk), bytes(sc)


def main():
    src, dst = sys.argv[1:3]
    copy_other_files(src, dst)
    items = []
    for name, (dt, shape, data) in sorted(tensors(src).items()):
        if len(shape) == 3 and 'mlp.experts.' in name and 'bias' not in name:
            E, A, B = shape
            blk, sc = pack(struct.unpack('<%df' % (E * A * B), data), E, A, B)
            items.append((name + '_blocks', ('U8', [E, B, A // 32, 16], blk)))
            items.append((name + '_scales', ('U8', [E, B, A // 32], sc)))
        else:
            items.append((name, (dt, shape, data)))
    write_tensors(os.path.join(dst, 'model.safetensors'), items)
    cp = os.path.join(dst, 'config.json')
    c = json.load(open(cp))
    c['quantization_config'] = {'modules_to_not_convert': ['model.layers.*.self_attn', 'model.layers.*.mlp.router',
                                                           'model.embed_tokens', 'lm_head'], 'quant_method': 'mxfp4'}
    if sys.argv[3:] == ['list-experts']:
        c['quantization_config']['modules_to_not_convert'].append('model.layers.*.mlp.experts')
    json.dump(c, open(cp, 'w'), indent=2)


main()
