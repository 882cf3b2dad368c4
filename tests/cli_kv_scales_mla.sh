#!/usr/bin/env bash
# cli_kv_scales_mla.sh -- `convert mla`'s export of a source with a static FP8 KV cache (per-layer
# k_scale / v_scale; quant_fused.h: quant_kv_scale) on stories260K-hf quantized by tests/fp8ct_quant.py
# ... kv (compressed-tensors' kv_cache_scheme) and the same tensors under ModelOpt's config
# (quant_algo FP8, kv_cache_quant_algo FP8, in config.json and hf_quant_config.json):
#  - an MLA layer caches its latent, which vLLM / SGLang quantize with k_scale alone: the source's GQA
#    k_scale / v_scale fit none of it, so the export writes none and drops the static scheme that
#    names them (kv_cache_scheme; ModelOpt's kv_cache_quant_algo -> null) -- the old export kept the
#    scheme with no scales and said nothing --, says so in its line and the manifest
#    (kv_scales_dropped, FaRR's key), keeps the rest of quantization_config;
#  - `lint` on the export finds nothing about KV cache scales.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-kv-scales-mla
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
python3 "$ATTNLAB_SRC/tests/fp8ct_quant.py" "$SRC" "$T/kv" tensor kv
# the same tensors as ModelOpt writes its config (FP8 weights, FP8 KV cache)
cp -r "$T/kv" "$T/mo"
python3 - "$T/mo" <<'PY'
import json, os, sys
d = sys.argv[1]
c = json.load(open(os.path.join(d, 'config.json')))
c['quantization_config'] = {'quant_method': 'modelopt', 'quant_algo': 'FP8', 'kv_cache_quant_algo': 'FP8',
                            'exclude_modules': ['lm_head']}
json.dump(c, open(os.path.join(d, 'config.json'), 'w'), indent=2)
json.dump({'producer': {'name': 'modelopt'}, 'quantization': {'quant_algo': 'FP8', 'kv_cache_quant_algo': 'FP8',
           'exclude_modules': ['lm_head']}}, open(os.path.join(d, 'hf_quant_config.json'), 'w'), indent=2)
PY

# qc DIR FILE: FILE's quantization config (config.json's quantization_config, hf_quant_config's quantization)
# as "kv_cache_scheme=<present|absent> kv_cache_quant_algo=<value|absent> method=<quant_method or quant_algo>"
qc() { python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
q = j.get('quantization_config', j.get('quantization', {}))
print('kv_cache_scheme=%s kv_cache_quant_algo=%s method=%s' % ('present' if 'kv_cache_scheme' in q else 'absent',
      q.get('kv_cache_quant_algo', 'absent'), q.get('quant_method', q.get('quant_algo'))))" "$1/$2" 2>&1; }
nscales() { python3 -c "
import sys
from st_tensors import tensors
print(sum(n.endswith(('k_scale', 'v_scale')) for n in tensors(sys.argv[1])))" "$1"; }
man() { python3 -c "
import json, sys
k = json.load(open(sys.argv[1] + '/attnlab_manifest.json')).get('kv_scales_dropped')
print(k and (k['tensors'], k['layers'], k['scheme_dropped']))" "$1" 2>&1; }

ok "the source: 10 scales, a static kv_cache_scheme [$(nscales "$T/kv") $(qc "$T/kv" config.json)]" \
    test "$(nscales "$T/kv") $(qc "$T/kv" config.json)" = "10 kv_cache_scheme=present kv_cache_quant_algo=absent method=compressed-tensors"

run -e "load $T/kv; convert mla kv-rank 16; export $T/mla"
out=$(cat out.txt)
ok "export ran (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0
ok "the line says the scales and the scheme were dropped, and why [$(grep -m1 KV <<<"$out")]" \
    has "$out" "^dropped 10 static KV cache scales (k_scale / v_scale) of layers 0-4 and the static scheme in quantization_config: an MLA layer caches its latent (vLLM and SGLang quantize it with k_scale alone)"
ok "no KV scale in the export [$(nscales "$T/mla")]" test "$(nscales "$T/mla")" = 0
ok "the export's config: no kv_cache_scheme, the rest kept [$(qc "$T/mla" config.json)]" \
    test "$(qc "$T/mla" config.json)" = "kv_cache_scheme=absent kv_cache_quant_algo=absent method=compressed-tensors"
ok "the manifest records them [$(man "$T/mla")]" test "$(man "$T/mla")" = "(10, [0, 4], True)"
out=$(e "lint $T/mla")
ok "lint of the export: no KV cache scale finding [$(grep 'KV cache' <<<"$out")]" hasnt "$out" "KV cache scales"
ok "lint of the export: vLLM loads it [$(grep '^vLLM' <<<"$out")]" has "$out" "^vLLM  *DeepseekV3ForCausalLM  *loads\( with --skip-tokenizer-init (or --tokenizer naming the source)\)\?$"
ok "the export loads in attnlab" has "$(e "load $T/mla; info")" "deepseek_v3"

run -e "load $T/mo; convert mla kv-rank 16; export $T/mlamo"
out=$(cat out.txt)
ok "ModelOpt: export ran (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0
ok "ModelOpt: the line" has "$out" "^dropped 10 static KV cache scales (k_scale / v_scale) of layers 0-4 and the static scheme"
ok "ModelOpt: config.json's kv_cache_quant_algo null [$(qc "$T/mlamo" config.json)]" \
    test "$(qc "$T/mlamo" config.json)" = "kv_cache_scheme=absent kv_cache_quant_algo=None method=modelopt"
ok "ModelOpt: hf_quant_config.json's too [$(qc "$T/mlamo" hf_quant_config.json)]" \
    test "$(qc "$T/mlamo" hf_quant_config.json)" = "kv_cache_scheme=absent kv_cache_quant_algo=None method=FP8"
ok "ModelOpt: the manifest [$(man "$T/mlamo")]" test "$(man "$T/mlamo")" = "(10, [0, 4], True)"

# a source without a KV cache scheme: no line, no manifest key
python3 "$ATTNLAB_SRC/tests/fp8ct_quant.py" "$SRC" "$T/nokv" tensor
out=$(e "load $T/nokv; convert mla kv-rank 16; export $T/mla2")
ok "no KV cache: no line" hasnt "$out" "KV cache scales"
ok "no KV cache: no manifest key [$(man "$T/mla2")]" test "$(man "$T/mla2")" = "None"
cli_done
