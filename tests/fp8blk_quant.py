"""fp8blk_quant.py -- a folder's projections ("*_proj.weight", F32) written as fine-grained FP8 the way
publishers other than DeepSeek ship it (tensor.h: "<w>" F8_E4M3 and "<w>_scale_inv", one scale per
128 x 128 block, partial at the edges, multiplying), or their decoded values in F32: a checkpoint
quantized that way and its F32 twin, for tests/cli_fp8blk.sh (pure Python, no numpy).

    python3 fp8blk_quant.py SRC DST f32|bf16|e8m0|ue8m0|ct [twin|nan-scale|e8m0-255|not-pow2]

f32: F32 grid, Qwen3 / MiniMax config (fmt float8_e4m3fn); bf16: the grid in BF16 (Qwen3-*-FP8's
headers); e8m0: the grid as F8_E8M0 bytes (DeepSeek-V4); ue8m0: F32 powers of two with DeepSeek-V3.2's
"scale_fmt": "ue8m0"; ct: compressed-tensors' FP8_BLOCK (llm-compressor's preset: strategy "block",
block_structure [128, 128]), the F32 grid named "<w>_scale". twin: the decoded values in F32 and no quantization_config. nan-scale puts a NaN
in the first attention weight's grid (BF16 or F32), e8m0-255 the code 0xFF there, not-pow2 a scale of
0.3 there (under ue8m0).
"""
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_tensors import copy_other_files, tensors, write_tensors, e4m3 as dec, e4m3_code as code, f32, bf16  # noqa: E402

B = 128


def scale_of(amax, kind):
    s = f32(amax / 448) if amax > 0 else 1.0
    if kind == 'bf16':
        s = bf16(s)
        while s * 448 < amax:      # BF16 rounding down must still hold the block
            s = bf16(s * 1.01)
    if kind in ('e8m0', 'ue8m0'):
        s = 2.0 ** math.ceil(math.log2(s))
    return s


def grid_bytes(vals, kind):
    if kind in ('f32', 'ue8m0', 'ct'):
        return 'F32', struct.pack('<%df' % len(vals), *vals)
    if kind == 'bf16':
        return 'BF16', b''.join(struct.pack('<f', v)[2:] if not math.isnan(v) else b'\xc0\x7f' for v in vals)
    return 'F8_E8M0', bytes(255 if math.isnan(v) else int(round(math.log2(v))) + 127 for v in vals)


def quantize(vals, R, C, kind):
    """codes, grid (list), decoded floats."""
    nr, nc = (R + B - 1) // B, (C + B - 1) // B
    grid = []
    for bi in range(nr):
        for bj in range(nc):
            amax = max(abs(vals[i * C + j]) for i in range(bi * B, min(R, bi * B + B)) for j in range(bj * B, min(C, bj * B + B)))
            grid.append(scale_of(amax, kind))
    codes, out = bytearray(R * C), [0.0] * (R * C)
    for i in range(R):
        for j in range(C):
            s = grid[(i // B) * nc + j // B]
            c = code(vals[i * C + j] / s)
            codes[i * C + j] = c
            out[i * C + j] = f32(dec(c) * s)
    return bytes(codes), grid, out, [nr, nc]


def main():
    src, dst, kind = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else ''
    copy_other_files(src, dst)
    items, broke = [], False
    for name, (dt, shape, data) in sorted(tensors(src).items()):
        if not (name.endswith('_proj.weight') and dt == 'F32' and len(shape) == 2):
            items.append((name, (dt, shape, data)))
            continue
        R, C = shape
        codes, grid, out, gshape = quantize(struct.unpack('<%df' % (R * C), data), R, C, kind)
        if mode == 'twin':
            items.append((name, ('F32', shape, struct.pack('<%df' % (R * C), *out))))
            continue
        first = not broke and 'self_attn' in name
        broke = broke or first
        if first and mode in ('nan-scale', 'e8m0-255'):
            grid[0] = float('nan')
        if first and mode == 'not-pow2':
            grid[0] = f32(0.3)
        items.append((name, ('F8_E4M3', shape, codes)))
        gdt, gb = grid_bytes(grid, kind)
        items.append((name + ('_scale' if kind == 'ct' else '_scale_inv'), (gdt, gshape, gb)))
    write_tensors(os.path.join(dst, 'model.safetensors'), items)
    if mode != 'twin':
        cp = os.path.join(dst, 'config.json')
        c = json.load(open(cp))
        q = {'activation_scheme': 'dynamic', 'fmt': 'e4m3', 'quant_method': 'fp8', 'weight_block_size': [128, 128]}
        if kind == 'f32':
            q['fmt'] = 'float8_e4m3fn'        # MiniMax-M2's spelling
        if kind == 'ue8m0':
            q['scale_fmt'] = 'ue8m0'          # DeepSeek-V3.2
        if kind == 'ct':                      # llm-compressor's FP8_BLOCK scheme
            q = {'quant_method': 'compressed-tensors', 'format': 'float-quantized', 'ignore': ['lm_head'],
                 'config_groups': {'group_0': {'targets': ['Linear'], 'weights': {
                     'num_bits': 8, 'type': 'float', 'symmetric': True, 'strategy': 'block', 'block_structure': [128, 128],
                     'dynamic': False}, 'input_activations': {'num_bits': 8, 'type': 'float', 'symmetric': True,
                                                              'strategy': 'group', 'group_size': 128, 'dynamic': True}}}}
        c['quantization_config'] = q
        json.dump(c, open(cp, 'w'), indent=2)


main()
