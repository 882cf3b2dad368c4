"""fp8ct_quant.py -- a folder's projections ("*_proj.weight", F32) written as compressed-tensors FP8
(tensor.h: "<w>" F8_E4M3 and "<w>_scale" that multiplies, one per tensor or per output row), or
their decoded values in F32: a checkpoint quantized that way and its F32 twin, for
tests/cli_fp8ct.sh (pure Python, no numpy).

    python3 fp8ct_quant.py SRC DST tensor|channel [f32|bf16|bf16-f32|nan-scale|short-scale|dynamic|kv]

tensor: a scale of shape [] (F32; with bf16: [1] BF16, compressed-tensors' own form); channel: [R, 1]
(F32, or BF16 with bf16). Each module also gets an "input_scale" F32 [] (the activations', which
weights do not use; it is 1e9 so a reader that used it would be caught), but with dynamic: then
the config's input_activations are dynamic per token (llm-compressor's FP8_DYNAMIC) and none is
written. kv: a static FP8 KV cache too (llm-compressor's kv_cache_scheme): per layer
"self_attn.k_scale" and "self_attn.v_scale" F32 [] (0.25 and 0.125 + layer / 64).
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_tensors import copy_other_files, tensors, write_tensors, e4m3, e4m3_code as code, f32, bf16  # noqa: E402


def main():
    src, dst, strat = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else ''
    copy_other_files(src, dst)
    items, broke = [], False
    for name, (dt, shape, data) in sorted(tensors(src).items()):
        if not (name.endswith('_proj.weight') and dt == 'F32' and len(shape) == 2):
            items.append((name, (dt, shape, data)))
            continue
        R, C = shape
        vals = struct.unpack('<%df' % (R * C), data)
        rows = [vals[i * C:(i + 1) * C] for i in range(R)]
        if strat == 'tensor':
            sc = [f32(max(abs(v) for v in vals) / 448)] * R
            if 'bf16' in mode:
                sc = [bf16(s) for s in sc]
        else:
            sc = [f32(max(abs(v) for v in r) / 448) for r in rows]
            if 'bf16' in mode:
                sc = [bf16(s) for s in sc]
        codes, out = bytearray(), []
        for i, r in enumerate(rows):
            for v in r:
                c = code(v / sc[i])
                codes.append(c)
                out.append(f32(e4m3(c) * sc[i]))
        first = not broke and 'self_attn' in name
        broke = broke or first
        if first and mode == 'nan-scale':
            sc = [float('nan')] + sc[1:]
        if 'f32' in mode:
            items.append((name, ('F32', shape, struct.pack('<%df' % (R * C), *out))))
            continue
        items.append((name, ('F8_E4M3', shape, bytes(codes))))
        if strat == 'tensor' and 'bf16' in mode:
            items.append((name + '_scale', ('BF16', [1], struct.pack('<f', sc[0])[2:])))
        elif strat == 'tensor':
            items.append((name + '_scale', ('F32', [], struct.pack('<f', sc[0]))))
        elif 'bf16' in mode:
            items.append((name + '_scale', ('BF16', [R, 1], b''.join(struct.pack('<f', s)[2:] for s in sc))))
        else:
            n = R - 1 if first and mode == 'short-scale' else R
            items.append((name + '_scale', ('F32', [n, 1], struct.pack('<%df' % n, *sc[:n]))))
        if mode != 'dynamic':
            items.append((name[:-len('weight')] + 'input_scale', ('F32', [], struct.pack('<f', 1e9))))
    if mode == 'kv':
        layers = sorted({int(n.split('.')[2]) for n, _ in items if n.startswith('model.layers.')})
        for L in layers:
            for side, v in (('k', 0.25), ('v', 0.125 + L / 64)):
                items.append(('model.layers.%d.self_attn.%s_scale' % (L, side), ('F32', [], struct.pack('<f', v))))
    write_tensors(os.path.join(dst, 'model.safetensors'), items)
    if 'f32' not in mode:      # what llm-compressor writes for FP8 (static per-tensor or per-channel weights)
        cp = os.path.join(dst, 'config.json')
        c = json.load(open(cp))
        c['quantization_config'] = {
            'quant_method': 'compressed-tensors', 'format': 'float-quantized', 'ignore': ['lm_head'],
            'config_groups': {'group_0': {'targets': ['Linear'], 'weights': {
                'num_bits': 8, 'type': 'float', 'symmetric': True, 'strategy': strat, 'dynamic': False},
                'input_activations': {'num_bits': 8, 'type': 'float', 'strategy': 'token', 'dynamic': True}
                if mode == 'dynamic' else {'num_bits': 8, 'type': 'float', 'strategy': 'tensor', 'dynamic': False}}}}
        if mode == 'kv':
            c['quantization_config']['kv_cache_scheme'] = {'num_bits': 8, 'type': 'float', 'strategy': 'tensor',
                                                           'dynamic': False, 'symmetric': True}
        json.dump(c, open(cp, 'w'), indent=2)


main()
