"""qwen3_norms.py SRC DST unit|gains -- stories260K-hf (a Llama) written as a Qwen3 checkpoint: per-head
q_norm / k_norm added to every layer, unit gains or trained-looking ones (0.4-3.4, varying by dim,
layer, q / k). Pure Python over st_tensors.py (tests/cli_tmla_qknorm.sh)."""
import json, os, struct, sys
sys.path.insert(0, os.path.join(os.environ['ATTNLAB_SRC'], 'tests'))
from st_tensors import tensors, write_tensors, copy_other_files
src, dst, kind = sys.argv[1], sys.argv[2], sys.argv[3]
copy_other_files(src, dst)
cfg = json.load(open(os.path.join(src, 'config.json')))
cfg.update(model_type='qwen3', architectures=['Qwen3ForCausalLM'])
json.dump(cfg, open(os.path.join(dst, 'config.json'), 'w'), indent=1)
t = tensors(src)
d = cfg['head_dim']
for L in range(cfg['num_hidden_layers']):
    for j, p in enumerate(('q_norm', 'k_norm')):
        g = [1.0] * d if kind == 'unit' else [0.4 + 0.3 * ((7 * e + 3 * L + 5 * j) % 11) for e in range(d)]
        t['model.layers.%d.self_attn.%s.weight' % (L, p)] = ('F32', [d], struct.pack('<%df' % d, *g))
write_tensors(os.path.join(dst, 'model.safetensors'), sorted(t.items()))
