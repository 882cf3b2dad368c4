"""hybrid_stack.py SRC DST -- an 8-layer hybrid from a 4-layer synthetic one (synth family qwen3_next /
qwen3_5_moe: layers 0-2 Gated DeltaNet, 3 attention): layers 4-7 are copies of 0-3, so 3 and 7 are the
attention layers, and layer 7's v_proj has its two KV heads' row blocks swapped (the rank-6 V of KV head 0
moves to KV head 1: layer 7's VO ranks are layer 3's with the head groups exchanged, so the two layers
differ in every table). config.json: num_hidden_layers 8, layer_types doubled where present. For
tests/cli_hybrid_sweeps.sh."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_tensors  # noqa: E402


def main(src, dst):
    st_tensors.copy_other_files(src, dst)
    t = st_tensors.tensors(src)
    items = list(t.items())
    for name, v in t.items():
        m = re.match(r'(.*\blayers\.)(\d+)(\..*)$', name)
        if not m or 'visual' in name:
            continue
        new = '%s%d%s' % (m.group(1), int(m.group(2)) + 4, m.group(3))
        dt, shape, data = v
        if int(m.group(2)) == 3 and new.endswith('self_attn.v_proj.weight'):
            half = len(data) // 2          # [2 KV heads x dv, D] row-major: the two heads' blocks
            data = data[half:] + data[:half]
        items.append((new, (dt, shape, data)))
    for f in os.listdir(dst):
        if f.endswith('.safetensors'):
            os.remove(os.path.join(dst, f))
    st_tensors.write_tensors(os.path.join(dst, 'model.safetensors'), items)
    path = os.path.join(dst, 'config.json')
    cfg = json.load(open(path))
    text = cfg.get('text_config', cfg)
    text['num_hidden_layers'] = 8
    if 'layer_types' in text:
        text['layer_types'] = text['layer_types'] * 2
    cfg.pop('attnlab_synth', None)
    json.dump(cfg, open(path, 'w'), indent=1)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
