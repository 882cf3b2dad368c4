"""qwen3vl_experts.py -- a qwen3_vl_moe folder's fused experts (mlp.experts.gate_up_proj [E, D, 2I] and
down_proj [E, I, D], used as x @ W, as Qwen3-VL MoE releases them) rewritten, for tests/cli_hf_readers.sh and
scripts/hf_check_bundle.sh (pure Python). The other tensors and files are kept.

    python3 qwen3vl_experts.py SRC DST swap-halves|transpose-down|square

  swap-halves     each gate_up_proj block's column halves exchanged ([up | gate]): another model
  transpose-down  each down_proj block stored transposed, [E, D, I]: a layout no reader takes (attnlab refuses it
                  by its shape where I != D)
  square          new experts of width I = hidden_size (values from a fixed LCG, in the source's dtype), config.json's
                  moe_intermediate_size with them: down_proj [E, D, D] is square, which transformers 5 reads
                  untransposed (conversion_mapping.py's Transpose(1, 2, check_dims=True))
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_tensors import copy_other_files, tensors, write_tensors  # noqa: E402


def unpack(dt, n, data):
    if dt == 'BF16':
        return [struct.unpack('<f', struct.pack('<I', h << 16))[0] for h in struct.unpack('<%dH' % n, data)]
    return list(struct.unpack('<%df' % n, data))


def pack(dt, vals):
    if dt == 'BF16':   # float32 bits + 0x8000, truncated (ties away from zero)
        bits = struct.unpack('<%dI' % len(vals), struct.pack('<%df' % len(vals), *vals))
        return struct.pack('<%dH' % len(vals), *(((b + 0x8000) >> 16) & 0xffff for b in bits))
    return struct.pack('<%df' % len(vals), *vals)


def lcg_values(n, seed, scale):
    """n values in [-scale, scale) from a 64-bit LCG (Knuth's MMIX constants)."""
    out, s = [], seed
    for _ in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append(((s >> 11) / float(1 << 53) * 2 - 1) * scale)
    return out


def text_config(cfg):
    return cfg['text_config'] if 'text_config' in cfg else cfg


def main():
    src, dst, mode = sys.argv[1:4]
    copy_other_files(src, dst)
    cfg = json.load(open(os.path.join(src, 'config.json')))
    D = text_config(cfg)['hidden_size']
    items, k = [], 0
    for name, (dt, shape, data) in sorted(tensors(src).items()):
        gu, dn = name.endswith('mlp.experts.gate_up_proj'), name.endswith('mlp.experts.down_proj')
        if not (gu or dn):
            items.append((name, (dt, shape, data)))
            continue
        E, a, b = shape
        v = unpack(dt, E * a * b, data)
        if mode == 'swap-halves' and gu:       # [E, D, 2I]: columns [I, 2I) first, then [0, I)
            h = b // 2
            v = [v[(e * a + i) * b + (j + h) % b] for e in range(E) for i in range(a) for j in range(b)]
        elif mode == 'transpose-down' and dn:  # [E, I, D] -> [E, D, I]
            v = [v[(e * a + i) * b + o] for e in range(E) for o in range(b) for i in range(a)]
            a, b = b, a
        elif mode == 'square':                 # I = D: gate_up [E, D, 2D], down [E, D, D]
            a, b = (D, 2 * D) if gu else (D, D)
            k += 1
            v = lcg_values(E * a * b, 1000 + k, 1 / D ** 0.5)
        items.append((name, (dt, [E, a, b], pack(dt, v))))
    write_tensors(os.path.join(dst, 'model.safetensors'), items)
    index = os.path.join(dst, 'model.safetensors.index.json')
    if os.path.exists(index):
        os.remove(index)
    if mode == 'square':
        text_config(cfg)['moe_intermediate_size'] = D
        json.dump(cfg, open(os.path.join(dst, 'config.json'), 'w'), indent=1)


if __name__ == '__main__':
    main()
