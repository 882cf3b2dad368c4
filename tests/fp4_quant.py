"""fp4_quant.py -- a folder's projections ("*_proj.weight", F32, columns a multiple of 32) written in
MXFP4 or NVFP4 (tensor.h's layouts), or their decoded values in F32: a checkpoint quantized in each
encoding and its F32 twin, for tests/cli_fp4.sh (pure Python, no numpy).

    python3 fp4_quant.py SRC DST mxfp4|nvfp4|ctnvfp4 [f32|nan-scale|short-scale|unlisted]

The projections left unquantized (columns not a multiple of 32: stories260K's down_proj) are listed in
the config's ignore, as ModelOpt and llm-compressor list what they skip; `unlisted` leaves them out
(a config that quantizes modules stored plain: lint's error). With FP4_LM_HEAD=1 in the environment
an untied lm_head is quantized too (and not listed), in the copy and in its F32 twin alike.

ctnvfp4 is compressed-tensors' nvfp4-pack-quantized: "<w>_packed", "<w>_scale" and a
"<w>_global_scale" that divides the block scales (W = e2m1 * (scale / global)).
"""
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_tensors import copy_other_files, tensors, write_tensors, e4m3, f32  # noqa: E402

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def quantize(vals, R, C, enc):
    """codes (bytes), scales (bytes), g, decoded floats."""
    B = 32 if enc == 'mxfp4' else 16
    g = 1.0 if enc == 'mxfp4' else f32(max(abs(v) for v in vals) / (6 * 448))
    if enc == 'ctnvfp4':
        G, g = f32(6 * 448 / max(abs(v) for v in vals)), 1.0   # compressed-tensors' global scale: divides
    codes, scales, out = bytearray(R * C // 2), bytearray(), [0.0] * (R * C)
    for i in range(R):
        for b in range(C // B):
            blk = vals[i * C + b * B:i * C + b * B + B]
            bmax = max(abs(v) for v in blk)
            if enc == 'mxfp4':
                e = math.ceil(math.log2(bmax / 6)) if bmax > 0 else 0
                sc, s = e + 127, 2.0 ** e
            elif enc == 'nvfp4':
                sc = min(range(0x7f), key=lambda c: (e4m3(c) < bmax / 6 / g, e4m3(c)))
                s = e4m3(sc)
            else:
                sc = min(range(0x7f), key=lambda c: (e4m3(c) < bmax / 6 * G, e4m3(c)))
                s = f32(e4m3(sc) / G)                      # the block scale after the division
            scales.append(sc)
            for j, v in enumerate(blk):
                c = min(range(16), key=lambda k: abs(E2M1[k] - v / (s * g))) if s > 0 else 0
                col = b * B + j
                codes[(i * C + col) // 2] |= c << 4 if col & 1 else c
                out[i * C + col] = f32(E2M1[c] * s) if enc == 'ctnvfp4' else f32(E2M1[c] * s * g)
    return bytes(codes), bytes(scales), (G if enc == 'ctnvfp4' else g), out


def main():
    src, dst, enc = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else ''
    copy_other_files(src, dst)
    items, broke = [], False    # broke: the hostile modes broke the first attention weight
    plain = []                  # projections left unquantized (columns not a multiple of 32): listed
    lm_head = os.environ.get('FP4_LM_HEAD') == '1'
    for name, (dt, shape, data) in sorted(tensors(src).items()):
        head = lm_head and name == 'lm_head.weight'
        if not ((name.endswith('_proj.weight') or head) and dt == 'F32' and len(shape) == 2 and shape[1] % 32 == 0):
            if name.endswith('_proj.weight') and mode != 'unlisted':
                plain.append(name[:-len('.weight')])
            items.append((name, (dt, shape, data)))
            continue
        R, C = shape
        codes, scales, g, out = quantize(struct.unpack('<%df' % (R * C), data), R, C, enc)
        first = not broke and 'self_attn' in name
        broke = broke or first
        if first and mode == 'nan-scale':
            scales = bytes([0xff if enc == 'mxfp4' else 0x7f]) + scales[1:]
        nb = C // (32 if enc == 'mxfp4' else 16)
        sshape = [R, nb - 1] if first and mode == 'short-scale' else [R, nb]
        scales = scales[:R * sshape[1]]
        if mode == 'f32':
            items.append((name, ('F32', shape, struct.pack('<%df' % (R * C), *out))))
        elif enc == 'mxfp4':
            items.append((name + '_blocks', ('U8', [R, C // 32, 16], codes)))
            items.append((name + '_scales', ('U8', sshape, scales)))
        elif enc == 'ctnvfp4':
            items.append((name + '_packed', ('U8', [R, C // 2], codes)))
            items.append((name + '_scale', ('F8_E4M3', sshape, scales)))
            items.append((name + '_global_scale', ('F32', [1], struct.pack('<f', g))))
        else:
            items.append((name, ('U8', [R, C // 2], codes)))
            items.append((name + '_scale', ('F8_E4M3', sshape, scales)))
            items.append((name + '_scale_2', ('F32', [], struct.pack('<f', g))))
    write_tensors(os.path.join(dst, 'model.safetensors'), items)
    listed = [] if lm_head else ['lm_head']
    if mode != 'f32':      # the quantization_config each publisher writes, listing what it left plain
        cp = os.path.join(dst, 'config.json')
        c = json.load(open(cp))
        c['quantization_config'] = (   # mxfp4 quantizes experts alone: its linears need no list
            {'quant_method': 'mxfp4', 'modules_to_not_convert': listed} if enc == 'mxfp4' else
            {'quant_method': 'modelopt', 'quant_algo': 'NVFP4', 'ignore': listed + plain} if enc == 'nvfp4' else
            {'quant_method': 'compressed-tensors', 'format': 'nvfp4-pack-quantized', 'ignore': listed + plain,
             'config_groups': {'group_0': {'targets': ['Linear'], 'weights': {
                 'num_bits': 4, 'type': 'float', 'strategy': 'tensor_group', 'group_size': 16}}}})
        json.dump(c, open(cp, 'w'), indent=2)


main()
