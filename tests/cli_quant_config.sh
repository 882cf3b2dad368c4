#!/usr/bin/env bash
# cli_quant_config.sh -- the quantization config read once at load (core/io/quant_config.h), on
# stories260K-hf quantized by tests/fp8ct_quant.py and tests/fp4_quant.py: `info`'s quantization line
# names the scheme and the key that decided (config.json's quant_method, config_groups, ModelOpt's bare
# quant_algo, hf_quant_config.json); the same NVFP4 tensors described by each of ModelOpt's three
# places give the same ranks and ppl; lint reads hf_quant_config.json, and a FaRR export writes it with the
# rewritten modules in exclude_modules; `load` refuses, naming the tensor and the key, a module the
# ignore list names but that is stored FP8, a config whose scheme (INT4, NVFP4) is not the FP8 stored,
# F8_E4M3 codes whose weight_scale was removed, and a BF16 weight carrying a weight_scale; `lint` says
# the same, warns of an ignore entry naming nothing (an FP8 checkpoint now, not only FP4), says that
# projections the config quantizes but the folder stores unquantized (not listed) are an error, and
# refuses weight_block_size [64, 64].
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-quant-config
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
python3 "$ATTNLAB_SRC/tests/fp8ct_quant.py" "$SRC" "$T/ch" channel
python3 "$ATTNLAB_SRC/tests/fp4_quant.py" "$SRC" "$T/nv" nvfp4

# edit DIR PYTHON: runs PYTHON with c = DIR/config.json's object, written back after.
edit() {
    python3 - "$1" "$2" <<'EOF'
import json, os, sys
p = os.path.join(sys.argv[1], 'config.json')
c = json.load(open(p))
exec(sys.argv[2])
json.dump(c, open(p, 'w'), indent=2)
EOF
}
# copy SRC DST: a folder copy
copy() { rm -rf "$2"; cp -r "$1" "$2"; }

out=$(e "load $T/ch; info")
ok "ct FP8: info's quantization line, from config_groups" has "$out" \
    "^quantization  *compressed-tensors float-quantized, group_0: FP8 with per-tensor / per-channel weight_scale (config.json quantization_config.config_groups), ignore: 1 entry$"

ok "ct FP8: per group, the config group that decided" has "$out" \
    "^quantized_by  *attention FP8 with per-tensor / per-channel weight_scale (model.layers.0.self_attn.q_proj: quantization_config.config_groups.group_0); mlp "

# ---- ModelOpt's three places: the same tensors, the same numbers
an() { e "load $1 as m; ranks vo tau 0.9; ppl $TXT" | grep -v "^loaded\|^ppl of\|tok/s"; }
copy "$T/nv" "$T/nv-bare"
edit "$T/nv-bare" "del c['quantization_config']['quant_method']; c['quantization_config']['producer'] = {'name': 'modelopt'}"
copy "$T/nv" "$T/nv-hfq"
edit "$T/nv-hfq" "q = c.pop('quantization_config'); json.dump({'producer': {'name': 'modelopt'}, 'quantization': {'quant_algo': 'NVFP4', 'group_size': 16, 'exclude_modules': ['lm_head']}}, open(os.path.join(sys.argv[1], 'hf_quant_config.json'), 'w'))"
ok "modelopt in config.json: info says quant_method" has "$(e "load $T/nv; info")" \
    "^quantization  *modelopt NVFP4: NVFP4 (ModelOpt) (config.json quantization_config.quant_method), ignore: 6 entries$"
ok "bare quant_algo: info says quant_algo" has "$(e "load $T/nv-bare; info")" \
    "^quantization  *modelopt NVFP4: NVFP4 (ModelOpt) (config.json quantization_config.quant_algo), ignore: 6 entries$"
ok "hf_quant_config.json: info says so" has "$(e "load $T/nv-hfq; info")" \
    "^quantization  *modelopt NVFP4: NVFP4 (ModelOpt) (hf_quant_config.json quantization.quant_algo), exclude_modules: 1 entry$"
a=$(an "$T/nv"); b=$(an "$T/nv-bare"); c=$(an "$T/nv-hfq")
ok "the three places: ranks and ppl printed" test "$(grep -c . <<<"$a")" -gt 40
ok "the three places: the same ranks and ppl" test "$a" = "$b" -a "$a" = "$c"

# ---- a folder whose config lives in hf_quant_config.json alone: lint finds it; a FaRR export writes it
# with the rewritten (BF16) modules added to exclude_modules, so vLLM / SGLang load them unquantized
ok "hf_quant_config.json alone: lint does not ask for a quantization_config" hasnt "$(e "lint $T/nv-hfq")" \
    "no quantization_config in config.json"
out=$(e "load $T/nv-hfq; truncate vo tau 0.9 layers 1; export $T/hfq-ex format dense; load $T/hfq-ex as d; info")
ok "hf_quant_config export: written and loaded (q / k_proj excluded with v_proj: vLLM fuses them)" has "$out" "^quantization  *modelopt NVFP4: .*(hf_quant_config.json quantization.quant_algo), exclude_modules: 5 entries$"
ok "hf_quant_config export: the rewritten modules excluded" python3 -c "
import json, sys
q = json.load(open(sys.argv[1]))['quantization']
sys.exit(q['exclude_modules'] != ['lm_head'] + ['model.layers.1.self_attn.' + p for p in ('k_proj', 'o_proj', 'q_proj', 'v_proj')] or q['quant_algo'] != 'NVFP4')" \
    "$T/hfq-ex/hf_quant_config.json"

# ---- disagreements: refused naming the tensor and the key
copy "$T/ch" "$T/ig"
edit "$T/ig" "c['quantization_config']['ignore'].append('re:.*layers\\\\.1\\\\.self_attn\\\\.k_proj')"
run -e "load $T/ig"
ok "an ignored module stored FP8: refused" test "$(rc)" != 0
ok "... naming it and the entry" has "$(cat err.txt)" \
    "'model.layers.1.self_attn.k_proj' is stored as FP8 with per-tensor / per-channel weight_scale but quantization_config.ignore entry 're:.\*layers\\\\.1\\\\.self_attn\\\\.k_proj' lists it as not quantized"
copy "$T/ch" "$T/int4"
edit "$T/int4" "w = c['quantization_config']['config_groups']['group_0']['weights']; w.update(num_bits=4, type='int', strategy='group', group_size=32); c['quantization_config']['format'] = 'pack-quantized'"
run -e "load $T/int4"
ok "config says INT4, tensors FP8: refused" has "$(cat err.txt)" \
    "'model.layers.0.mlp.down_proj' is stored as FP8 with per-tensor / per-channel weight_scale but quantization_config.config_groups.group_0 says pack-quantized INT4"
copy "$T/ch" "$T/nvcfg"
edit "$T/nvcfg" "c['quantization_config'] = {'quant_method': 'modelopt', 'quant_algo': 'NVFP4', 'exclude_modules': ['lm_head']}"
run -e "load $T/nvcfg"
ok "config says NVFP4, tensors FP8: refused" has "$(cat err.txt)" \
    "'model.layers.0.mlp.down_proj' is stored as FP8 with per-tensor / per-channel weight_scale but config.json quantization_config.quant_method says NVFP4 (ModelOpt)"
copy "$T/ch" "$T/noscale"
python3 -c "
import os, sys
from st_tensors import tensors, write_tensors
d = sys.argv[1]
t = tensors(d)
del t['model.layers.1.self_attn.o_proj.weight_scale']
write_tensors(os.path.join(d, 'model.safetensors'), sorted(t.items()))" "$T/noscale"
run -e "load $T/noscale"
ok "F8 codes without their weight_scale: refused naming them" has "$(cat err.txt)" \
    "'model.layers.1.self_attn.o_proj.weight' is F8_E4M3 but its scales 'model.layers.1.self_attn.o_proj.weight_scale' are missing (quantization_config.config_groups.group_0"
copy "$T/ch" "$T/stray"
python3 -c "
import os, struct, sys
from st_tensors import tensors, write_tensors
d = sys.argv[1]
t = tensors(d)
t['model.embed_tokens.weight_scale'] = ('F32', [], struct.pack('<f', 2.0))
write_tensors(os.path.join(d, 'model.safetensors'), sorted(t.items()))" "$T/stray"
run -e "load $T/stray"
ok "an unquantized weight carrying a weight_scale: refused" has "$(cat err.txt)" \
    "'model.embed_tokens.weight' is not quantized but carries 'model.embed_tokens.weight_scale'"

# ---- lint: the same checks, an ignore entry naming nothing, projections the config quantizes stored unquantized
ok "lint: an ignored module stored FP8 is an error" has "$(e "lint $T/ig")" \
    "error .*'model.layers.1.self_attn.k_proj' is stored as FP8 with per-tensor / per-channel weight_scale but quantization_config.ignore entry"
copy "$T/ch" "$T/typo"
edit "$T/typo" "c['quantization_config']['ignore'].append('model.layers.*.mlp.gate_prj')"
out=$(e "lint $T/typo")
ok "lint: an ignore entry naming nothing (FP8 checkpoint) is a warning" has "$out" \
    "warning .*quantization_config.ignore entry 'model.layers.\*.mlp.gate_prj' names no module"
ok "lint: ... and lm_head names something" hasnt "$out" "entry 'lm_head'"
ok "lint: NVFP4 config, F32 down_proj listed in ignore by the writer: nothing said" hasnt "$(e "lint $T/nv")" "stored unquantized"
copy "$T/nv" "$T/nv-unlisted"
edit "$T/nv-unlisted" "c['quantization_config']['ignore'] = ['lm_head']"
ok "lint: NVFP4 config, F32 down_proj not listed: an error naming it (engines cannot load it; cli_quant_audit)" \
    has "$(e "lint $T/nv-unlisted")" \
    "error .*model.layers.0.mlp.down_proj.weight is stored unquantized but the quantization config (config.json quantization_config.quant_method) makes it NVFP4 (ModelOpt) (5 modules like it)"
copy "$T/ch" "$T/blk64"
edit "$T/blk64" "c['quantization_config'] = {'quant_method': 'fp8', 'weight_block_size': [64, 64]}"
ok "lint: weight_block_size [64, 64] is an error" has "$(e "lint $T/blk64")" \
    "error .*quantization_config.weight_block_size is \[64, 64\]: attnlab reads FP8 block scales of \[128, 128\]"
cli_done
