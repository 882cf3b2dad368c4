#!/usr/bin/env bash
# cli_oss_mxfp4.sh -- gpt-oss's stacked MXFP4 experts outside the forward pass (issue 28): a `synth
# family gpt_oss` checkpoint with its experts written by tests/oss_mxfp4_quant.py as released
# (gate_up_proj_blocks [E, 2I, D/32, 16], _scales [E, 2I, D/32]; down_proj likewise) and gpt-oss's
# quantization_config: `info` names the experts' encoding (MXFP4), the config's key and, per group, the
# rule that decided (attention: a modules_to_not_convert glob); `lint` takes
# the blocks and scales as the experts they are (transformers loads it); a FaRR export copies every
# expert's blocks and scales bit for bit and keeps the quantization_config, and loads with the same
# encodings; a config listing the experts in modules_to_not_convert is refused at load naming them.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-oss-mxfp4
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
run -e "synth family gpt_oss $T/oss"
ok "synth family gpt_oss" test "$(rc)" = 0
python3 "$ATTNLAB_SRC/tests/oss_mxfp4_quant.py" "$T/oss" "$T/mx"
out=$(e "load $T/mx; info")
ok "info: the experts are MXFP4" has "$out" "^weights  *attention F32, experts MXFP4, embeddings F32$"
ok "info: the key that decided" has "$out" \
    "^quantization  *mxfp4: MXFP4 (config.json quantization_config.quant_method), modules_to_not_convert: 4 entries$"
ok "info: per group, the rule that decided" has "$out" \
    "^quantized_by  *attention unquantized (model.layers.0.self_attn.q_proj: quantization_config.modules_to_not_convert entry 'model.layers.\*.self_attn'); experts MXFP4 (model.layers.0.mlp.experts.gate_up_proj: config.json quantization_config.quant_method); embeddings unquantized (lm_head: quantization_config.modules_to_not_convert entry 'lm_head')$"
ok "info: the F32 source's experts named too" has "$(e "load $T/oss; info")" "^weights  *attention F32, experts F32, embeddings F32$"
out=$(e "lint $T/mx")
ok "lint: transformers loads it" has "$out" "^transformers  *GptOssForCausalLM  *loads$"
ok "lint: no expert tensor missing or unknown" hasnt "$out" "missing\|unknown\|_blocks is\|_scales is"

out=$(e "load $T/mx; truncate vo tau 0.9 layers 1; export $T/ex format dense; load $T/ex as d; info")
ok "export: written" has "$out" "^exported VO of mx to .*tensors copied bit for bit, 4 rewritten"
msg=$(python3 - "$T/mx" "$T/ex" <<'PY'
import json, os, sys
from st_tensors import tensors
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
bad = [k for k in a if not k.startswith('model.layers.1.self_attn.') and b.get(k) != a[k]]
n = sum(1 for k in a if (k.endswith('_blocks') or k.endswith('_scales')) and b.get(k) == a[k])
bad += [] if n == 16 else ['%d of 16 expert blocks / scales kept' % n]
qa, qb = (json.load(open(os.path.join(d, 'config.json')))['quantization_config'] for d in sys.argv[1:3])
bad += [] if qa == qb else ['config changed: %s' % qb]
print(' '.join(bad))
PY
)
ok "export: experts' blocks and scales bit for bit, quantization_config kept [$msg]" test -z "$msg"
ok "export: loads with its experts MXFP4" has "$out" "^weights  *attention F32, experts MXFP4, embeddings F32$"

python3 "$ATTNLAB_SRC/tests/oss_mxfp4_quant.py" "$T/oss" "$T/listed" list-experts
run -e "load $T/listed"
ok "experts listed as not quantized: refused naming them and the entry" has "$(cat err.txt)" \
    "'model.layers.0.mlp.experts.down_proj' is stored as MXFP4 but quantization_config.modules_to_not_convert entry 'model.layers.\*.mlp.experts' lists it as not quantized"
cli_done
