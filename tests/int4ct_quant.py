"""int4ct_quant.py -- a folder's projections ("*_proj.weight", F32, columns a multiple of 32) written as
compressed-tensors pack-quantized INT4 (tensor.h: "<w>_packed" I32 eight values per word, element i
at bit 4i, stored as value + 8; "<w>_scale" BF16 per group of 32; "<w>_shape" I64 [2]), or their
decoded values in F32: a checkpoint quantized that way and its F32 twin, for tests/cli_int4ct.sh
(pure Python, no numpy).

    python3 int4ct_quant.py SRC DST [f32|nan-scale|short-scale|zero-point]

With INT4CT_ONLY=TEXT in the environment only the projections whose names contain TEXT are quantized
(".experts.": Kimi-K2.5's routed experts, as it is released).
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_tensors import copy_other_files, tensors, write_tensors, f32  # noqa: E402

bf16_bits = lambda x: (struct.unpack('<I', struct.pack('<f', x))[0] + 0x8000) >> 16
from_bf16 = lambda b: struct.unpack('<f', struct.pack('<I', b << 16))[0]


def quantize(vals, R, C):
    """packed words (bytes), scales (BF16 bytes), decoded floats."""
    words, scales, out = [], bytearray(), []
    for i in range(R):
        row = []
        for g in range(C // 32):
            blk = vals[i * C + g * 32:i * C + g * 32 + 32]
            sb = bf16_bits(max(abs(v) for v in blk) / 7 or 1.0)
            s = from_bf16(sb)
            scales += struct.pack('<H', sb)
            for v in blk:
                q = max(-8, min(7, round(v / s)))
                row.append(q)
                out.append(f32(q * s))
        for w in range(C // 8):
            word = 0
            for k in range(8):
                word |= (row[w * 8 + k] + 8) << (4 * k)
            words.append(word)
    return struct.pack('<%dI' % len(words), *words), bytes(scales), out


def main():
    src, dst = sys.argv[1:3]
    mode = sys.argv[3] if len(sys.argv) > 3 else ''
    copy_other_files(src, dst)
    items, broke, only = [], False, os.environ.get('INT4CT_ONLY', '')
    plain = []      # projections left unquantized: listed in ignore, as llm-compressor lists what it skips
    for name, (dt, shape, data) in sorted(tensors(src).items()):
        if not (name.endswith('_proj.weight') and dt == 'F32' and len(shape) == 2 and shape[1] % 32 == 0) or \
                only not in name:
            if name.endswith(('_proj.weight', '_proj_with_mqa.weight')) and len(shape) == 2:
                plain.append(name[:-len('.weight')])
            items.append((name, (dt, shape, data)))
            continue
        R, C = shape
        packed, scales, out = quantize(struct.unpack('<%df' % (R * C), data), R, C)
        first = not broke and 'self_attn' in name
        broke = broke or first
        if mode == 'f32':
            items.append((name, ('F32', shape, struct.pack('<%df' % (R * C), *out))))
            continue
        if first and mode == 'nan-scale':
            scales = b'\xc0\x7f' + scales[2:]
        sshape = [R, C // 32 - 1] if first and mode == 'short-scale' else [R, C // 32]
        items.append((name[:-len('weight')] + 'weight_packed', ('I32', [R, C // 8], packed)))
        items.append((name + '_scale', ('BF16', sshape, scales[:2 * sshape[0] * sshape[1]])))
        items.append((name + '_shape', ('I64', [2], struct.pack('<2q', R, C))))
        if first and mode == 'zero-point':
            items.append((name + '_zero_point', ('I8', [R, C // 32], bytes(R * C // 32))))
    write_tensors(os.path.join(dst, 'model.safetensors'), items)
    if mode != 'f32':
        cp = os.path.join(dst, 'config.json')
        c = json.load(open(cp))
        c['quantization_config'] = {
            'quant_method': 'compressed-tensors', 'format': 'pack-quantized', 'ignore': ['lm_head'] + plain,
            'config_groups': {'group_0': {'targets': ['Linear'], 'weights': {
                'num_bits': 4, 'type': 'int', 'symmetric': True, 'strategy': 'group', 'group_size': 32}}}}
        json.dump(c, open(cp, 'w'), indent=2)


main()
