"""qwen2_bias.py SRC DST -- a Llama-layout folder SRC rewritten as Qwen2 (model_type qwen2) in DST: its tensors as they
are, plus q_proj / k_proj / v_proj biases in each layer (the dtype of that layer's q_proj weight; values 0.5 N(0, 1)
from a fixed LCG, so every run writes the same bytes). Pure Python, no numpy. Used by tests/cli_convert_trust.sh."""
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_tensors import copy_other_files, tensors, write_tensors  # noqa: E402


def gauss(state):
    """Box-Muller over a 31-bit LCG: (value, state)."""
    state = (state * 1103515245 + 12345) % 2147483648
    u1 = (state + 1) / 2147483649.0
    state = (state * 1103515245 + 12345) % 2147483648
    u2 = state / 2147483648.0
    return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2), state


def encode(values, dt):
    f32 = struct.pack('<%df' % len(values), *values)
    if dt == 'F32':
        return f32
    if dt != 'BF16':
        sys.exit('qwen2_bias.py: q_proj is %s; give an F32 or BF16 folder' % dt)
    out = bytearray()
    for (u,) in struct.iter_unpack('<I', f32):          # round to nearest even, as dt_from_f32
        out += struct.pack('<H', ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF)
    return bytes(out)


def main(src, dst):
    os.makedirs(dst, exist_ok=True)
    copy_other_files(src, dst)
    t = tensors(src)
    items, state = sorted(t.items()), 7
    for name, (dt, shape, _) in list(items):
        for p in ('q_proj', 'k_proj', 'v_proj'):
            if name.endswith('self_attn.%s.weight' % p):
                vals = []
                for _ in range(shape[0]):
                    g, state = gauss(state)
                    vals.append(0.5 * g)
                items.append((name[:-len('weight')] + 'bias', (dt, [shape[0]], encode(vals, dt))))
    for f in os.listdir(dst):
        if f.endswith('.safetensors') or f.endswith('.safetensors.index.json'):
            os.remove(os.path.join(dst, f))
    write_tensors(os.path.join(dst, 'model.safetensors'), sorted(items))
    cfg = json.load(open(os.path.join(src, 'config.json')))
    cfg['model_type'], cfg['architectures'] = 'qwen2', ['Qwen2ForCausalLM']
    cfg.pop('attention_bias', None)
    cfg.pop('head_dim', None) if cfg.get('head_dim') == cfg['hidden_size'] // cfg['num_attention_heads'] else None
    json.dump(cfg, open(os.path.join(dst, 'config.json'), 'w'), indent=2)


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
