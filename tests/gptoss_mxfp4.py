"""gptoss_mxfp4.py -- a gpt-oss folder's fused F32 experts written as gpt-oss releases them (MXFP4:
"<name>_blocks" U8 [E, out, in / 32, 16] and "<name>_scales" U8 [E, out, in / 32] of each expert's
W (out, in), with the release's quantization_config), or their decoded values as F32 in the HF
x @ W layout [E, in, out]: an MXFP4 gpt-oss and its F32 twin, for tests/cli_gguf_2026.sh and
tests/cli_gguf_mxfp4.sh (pure Python). The source's experts may be F32 or BF16; its other tensors are kept.

    python3 gptoss_mxfp4.py SRC DST mxfp4|f32
"""
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_tensors import copy_other_files, tensors, write_tensors  # noqa: E402

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def quantize(vals, R, C):
    """MXFP4 of (R, C) row-major vals: codes (low nibble first), E8M0 scales per 32, decoded floats
    (fp4_quant.py's encoder, which runs on import)."""
    codes, scales, out = bytearray(R * C // 2), bytearray(), [0.0] * (R * C)
    for i in range(R):
        for b in range(C // 32):
            blk = vals[i * C + b * 32:i * C + b * 32 + 32]
            bmax = max(abs(v) for v in blk)
            e = math.ceil(math.log2(bmax / 6)) if bmax > 0 else 0
            scales.append(e + 127)
            for j, v in enumerate(blk):
                c = min(range(16), key=lambda k: abs(E2M1[k] - v / 2.0 ** e))
                col = b * 32 + j
                codes[(i * C + col) // 2] |= c << 4 if col & 1 else c
                out[i * C + col] = E2M1[c] * 2.0 ** e
    return bytes(codes), bytes(scales), out


def main():
    src, dst, mode = sys.argv[1:4]
    copy_other_files(src, dst)
    items = []
    for name, (dt, shape, data) in sorted(tensors(src).items()):
        if not (name.endswith('mlp.experts.gate_up_proj') or name.endswith('mlp.experts.down_proj')):
            items.append((name, (dt, shape, data)))
            continue
        E, n_in, n_out = shape                     # x @ W: [E, in, out]
        if dt == 'BF16':                           # a BF16 source (`synth family gpt_oss DIR dtype bf16`)
            v = [struct.unpack('<f', struct.pack('<I', h << 16))[0] for h in struct.unpack('<%dH' % (E * n_in * n_out), data)]
        else:
            v = struct.unpack('<%df' % (E * n_in * n_out), data)
        w = [v[(e * n_in + i) * n_out + o] for e in range(E) for o in range(n_out) for i in range(n_in)]
        codes, scales, out = quantize(w, E * n_out, n_in)
        if mode == 'mxfp4':
            items.append((name + '_blocks', ('U8', [E, n_out, n_in // 32, 16], codes)))
            items.append((name + '_scales', ('U8', [E, n_out, n_in // 32], scales)))
        else:
            back = [out[(e * n_out + o) * n_in + i] for e in range(E) for i in range(n_in) for o in range(n_out)]
            items.append((name, ('F32', shape, struct.pack('<%df' % len(back), *back))))
    write_tensors(os.path.join(dst, 'model.safetensors'), items)
    if mode == 'mxfp4':
        p = os.path.join(dst, 'config.json')
        c = json.load(open(p))
        c['quantization_config'] = {'modules_to_not_convert': ['model.layers.*.self_attn', 'model.layers.*.mlp.router',
                                                               'model.embed_tokens', 'lm_head'], 'quant_method': 'mxfp4'}
        json.dump(c, open(p, 'w'), indent=1)


if __name__ == '__main__':
    main()
