#!/usr/bin/env bash
# cli_export_quant_line.sh -- the FaRR export's line on FP8 weights it writes unquantized names the
# scales dropped and the lists their modules joined as the source's format has them (the lists the
# export wrote): DeepSeek's fine-grained FP8 (demo-r1: "_scale_inv", modules_to_not_convert -- the
# wording cli_farr_fp8 pins), compressed-tensors FP8 (weight_scale / input_scale, quantization_config.
# ignore), ModelOpt FP8 in hf_quant_config.json (its quantization.exclude_modules; config.json has no
# quantization_config) and in config.json's bare form (quant_algo, no quant_method; its ignore list).
# The old line said "_scale_inv ... quantization_config.modules_to_not_convert" for every FP8 source, and
# nothing for FP4 / INT4 sources: NVFP4 and INT4 (ignore) and MXFP4 (modules_to_not_convert) now say it.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-export-quant-line
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
python3 "$ATTNLAB_SRC/tests/fp8ct_quant.py" "$SRC" "$T/ct" tensor
python3 "$ATTNLAB_SRC/tests/fp8ct_quant.py" "$SRC" "$T/mo" tensor
python3 "$ATTNLAB_SRC/tests/fp8ct_quant.py" "$SRC" "$T/bare" tensor
python3 - "$T/mo" "$T/bare" <<'PY'
import json, sys
c = json.load(open(sys.argv[1] + '/config.json'))
del c['quantization_config']
json.dump(c, open(sys.argv[1] + '/config.json', 'w'), indent=2)
json.dump({'producer': {'name': 'modelopt', 'version': '0.29.0'}, 'quantization': {'quant_algo': 'FP8',
           'kv_cache_quant_algo': None, 'exclude_modules': ['lm_head']}}, open(sys.argv[1] + '/hf_quant_config.json', 'w'))
c['quantization_config'] = {'quant_algo': 'FP8', 'ignore': ['lm_head']}
json.dump(c, open(sys.argv[2] + '/config.json', 'w'), indent=2)
PY
cut="truncate vo tau 0.9 layers 1"
tail_="(transformers and vLLM load them unquantized beside the FP8 ones)"

out=$(e "load demo-r1; $cut; export $T/ex-r1 format dense")
ok "demo-r1: DeepSeek's wording" has "$out" \
    "^their _scale_inv dropped and their modules listed in quantization_config.modules_to_not_convert $tail_"
out=$(e "load $T/ct; $cut; export $T/ex-ct format dense")
ok "compressed-tensors: weight_scale / input_scale, ignore" has "$out" \
    "^their weight_scale / input_scale dropped and their modules listed in quantization_config.ignore $tail_"
ok "compressed-tensors: no _scale_inv, no modules_to_not_convert" hasnt "$out" "_scale_inv\|modules_to_not_convert"
ok "compressed-tensors: the list written is ignore" \
    test "$(python3 -c "import json, sys; q = json.load(open(sys.argv[1]))['quantization_config']; print(sorted(k for k in q if isinstance(q[k], list)), 'model.layers.1.self_attn.v_proj' in q['ignore'])" "$T/ex-ct/config.json")" = "['ignore'] True"
out=$(e "load $T/mo; $cut; export $T/ex-mo format dense")
ok "ModelOpt (hf_quant_config.json): its exclude_modules" has "$out" \
    "^their weight_scale / input_scale dropped and their modules listed in hf_quant_config.json quantization.exclude_modules $tail_"
ok "ModelOpt: config.json still has no quantization_config" hasnt "$(cat "$T/ex-mo/config.json")" "quantization_config"
out=$(e "load $T/bare; $cut; export $T/ex-bare format dense")
ok "ModelOpt bare config.json form: its ignore" has "$out" \
    "^their weight_scale / input_scale dropped and their modules listed in quantization_config.ignore $tail_"
python3 "$ATTNLAB_SRC/tests/fp4_quant.py" "$SRC" "$T/nvfp4" nvfp4
python3 "$ATTNLAB_SRC/tests/fp4_quant.py" "$SRC" "$T/mxfp4" mxfp4
python3 "$ATTNLAB_SRC/tests/int4ct_quant.py" "$SRC" "$T/int4"
for k in nvfp4:NVFP4:ignore int4:INT4:ignore mxfp4:MXFP4:modules_to_not_convert; do
    IFS=: read -r d enc list <<<"$k"
    out=$(e "load $T/$d; $cut; export $T/ex-$d format dense")
    ok "$d: the line names its scales and list" has "$out" \
        "^their $enc scales dropped and their modules listed in quantization_config.$list (engines load them unquantized beside the $enc ones)$"
done
cli_done
