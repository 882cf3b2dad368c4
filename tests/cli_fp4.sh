#!/usr/bin/env bash
# cli_fp4.sh -- MXFP4 and NVFP4 checkpoints (issue 28): stories260K-hf with its projections written
# by tests/fp4_quant.py (pure Python, its own decoding of the E2M1 table and the scales) in each
# encoding -- MXFP4, ModelOpt's NVFP4, compressed-tensors' nvfp4-pack-quantized (ctnvfp4: its global
# scale divides) --, beside an F32 twin holding the values Python decoded. `load` and `info` name the
# encoding per tensor group; `ranks vo` / `ranks qk` at tau 0.9 and `ppl` (f32 and bf16 compute)
# print the same as on the twin; a truncation's export copies every untouched tensor and scale bit for
# bit and writes the rewritten ones in BF16, listed as not quantized (modules_to_not_convert, ModelOpt's
# ignore); `export F.gguf` dequantizes them, saying so; `lint` checks the FP4 tensors and scales against
# the config (and asks for a quantization_config; MXFP4 linear layers, which transformers and vLLM read
# under quant_method mxfp4 as plain ones, are an error), and quantization_config's not-quantized lists (globs,
# 're:' regexes, parts of names) against the FP4 modules; a NaN block scale or a scale grid of the wrong shape is refused at `load`, naming the tensor.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-fp4
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
Q="python3 $ATTNLAB_SRC/tests/fp4_quant.py"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"

# what MODEL prints for the analyses, without its name
analyses() {
    e "load $1 as m; ranks vo tau 0.9; ranks qk offset 4 tau 0.9; ppl $TXT; set compute bf16; ppl $TXT" |
        grep -v "^loaded\|^ppl of\|tok/s\|^compute bf16 asked"
}

for enc in mxfp4 nvfp4 ctnvfp4; do
    ENC=$(tr a-z A-Z <<<"${enc#ct}")
    $Q "$SRC" "$T/$enc" $enc && $Q "$SRC" "$T/$enc-f32" $enc f32
    ok "$enc: written" test -f "$T/$enc/model.safetensors" -a -f "$T/$enc-f32/model.safetensors"
    out=$(e "load $T/$enc; info")
    ok "$enc: load names the encoding" has "$out" "^loaded $enc: llama, .*, $ENC -- "
    ok "$enc: info's dtype" has "$out" "^dtype  *$ENC$"
    ok "$enc: info's weights per group" has "$out" "^weights  *attention $ENC, mlp F32 + $ENC, embeddings F32$"
    ok "$enc: its KV cache is BF16" has "$out" "^kv_cache_dtype  *BF16$"
    a=$(analyses "$T/$enc")
    b=$(analyses "$T/$enc-f32")
    ok "$enc: ranks and ppl printed" test "$(grep -c . <<<"$a")" -gt 90
    ok "$enc: ranks and ppl equal the F32 twin's" test "$a" = "$b"
    [ "$a" = "$b" ] || diff <(echo "$a") <(echo "$b") | head -5
    ok "$enc: ppl 4.1-4.3" has "$a" "^  1127  1.4[0-9]*  4\.[12]"
    ok "$enc: bf16 compute says its products are float32" has "$(e "load $T/$enc; set compute bf16; ppl $TXT")" \
        "compute bf16 asked, but the weights are $ENC: products in float32"
done

# ---- export of a truncation: untouched tensors bit for bit with their scales, the rewritten ones BF16 of
# the logical shape without scales (q / k_proj too: vLLM fuses them with v_proj), listed as not quantized in the
# source's own key
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
for enc in mxfp4 nvfp4 ctnvfp4; do
    out=$(e "load $T/$enc; truncate vo tau 0.9 layers 1; ppl $TXT; export $T/ex-$enc format dense; load $T/ex-$enc as d; ppl $TXT")
    ok "$enc export: 4 rewritten (v / o_proj, and q / k_proj: vLLM fuses q/k/v)" has "$out" "^exported VO of $enc to .*tensors copied bit for bit, 4 rewritten"
    p=$(grep "^  1127" <<<"$out" | awk '{print $3}' | tr '\n' ' ')
    ok "$enc export: its ppl is the working copy's to BF16 rounding, of q / k too ($p)" \
        python3 -c "import sys; a, b = map(float, sys.argv[1:3]); sys.exit(abs(a / b - 1) > 5e-4)" $p
    msg=$(python3 - "$T/$enc" "$T/ex-$enc" $enc <<'PY'
import json, os, sys
from st_tensors import tensors
src, ex, enc = tensors(sys.argv[1]), tensors(sys.argv[2]), sys.argv[3]
mods = ('k_proj', 'o_proj', 'q_proj', 'v_proj')     # q / k too: vLLM fuses them with v_proj (quant_fused.h)
changed = lambda k: any(k.startswith('model.layers.1.self_attn.%s.' % p) for p in mods)
for k, v in src.items():
    if not changed(k) and ex.get(k) != v:
        print('untouched tensor differs:', k)
for p, R in (('k_proj', 32), ('o_proj', 64), ('q_proj', 64), ('v_proj', 32)):
    k = 'model.layers.1.self_attn.%s.weight' % p
    if ex.get(k, (0, 0))[:2] != ('BF16', [R, 64]):
        print(k, 'is', ex.get(k, (None, None))[:2])
    if [n for n in ex if n.startswith(k + '_')]:
        print(k, 'kept scales')
key = 'modules_to_not_convert' if enc == 'mxfp4' else 'ignore'
q = json.load(open(os.path.join(sys.argv[2], 'config.json')))['quantization_config']
was = json.load(open(os.path.join(sys.argv[1], 'config.json')))['quantization_config'][key]
if q[key] != was + ['model.layers.1.self_attn.' + p for p in mods] or was[0] != 'lm_head':
    print('not listed as unquantized after the source entries:', q)
PY
)
    ok "$enc export: untouched bit for bit, rewritten BF16 and listed [$msg]" test -z "$msg"
done

# ---- GGUF: dequantized in the dtype asked, said in its line; in f32 the values are the decoded ones
for enc in mxfp4 nvfp4 ctnvfp4; do
    ENC=$(tr a-z A-Z <<<"${enc#ct}")
    out=$(e "load $T/$enc; ppl $TXT; export $T/$enc.gguf dtype f32; load $T/$enc.gguf as g; tokenizer $SRC/tok512.bin; ppl $TXT")
    ok "$enc gguf: written" has "$out" "^exported $enc as GGUF to .*, F32, "
    ok "$enc gguf: its line says dequantized" has "$out" "^  $ENC weights dequantized to F32$"
    p=$(grep "^  1127" <<<"$out" | awk '{print $3}' | tr '\n' ' ')
    ok "$enc gguf: the same ppl from llama.cpp's layout ($p)" \
        python3 -c "import sys; a, b = map(float, sys.argv[1:3]); sys.exit(abs(a / b - 1) > 1e-5)" $p
done

# ---- lint: FP4 weights with their scales are what the config says; misshapen scales and a missing
# quantization_config are errors
for enc in mxfp4 nvfp4 ctnvfp4; do
    out=$(e "lint $T/$enc")
    if [ $enc = mxfp4 ]; then      # quant_method mxfp4 quantizes experts only: the engines build these linears plain
        ok "$enc lint: MXFP4 linear layers are an error naming one" has "$out" \
            "error .*model.layers.0.mlp.gate_proj.weight is stored in MXFP4 (30 linear modules like it) but quant_method mxfp4 quantizes MoE experts only"
        ok "$enc lint: transformers computes another model" has "$out" "^transformers  *LlamaForCausalLM  *loads, but computes a different model "
        ok "$enc lint: vLLM does not load it" has "$out" "^vLLM  *LlamaForCausalLM  *will not load "
    else
        ok "$enc lint: transformers loads it" has "$out" "^transformers  *LlamaForCausalLM  *loads$"
    fi
    ok "$enc lint: no U8 advisory" hasnt "$out" "bytes of U8 tensors"
    cp -r "$T/$enc" "$T/$enc-noq"
    python3 -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); del c['quantization_config']; json.dump(c, open(p, 'w'))" \
        "$T/$enc-noq/config.json"
    ok "$enc lint: no quantization_config is an error" has "$(e "lint $T/$enc-noq")" "error .*U8 tensors (packed FP4 codes?) but no quantization_config"
done

# quantization_config's lists against the FP4 modules: a listed FP4 module (here by a 're:' regex,
# by a glob) is an error, an entry naming nothing a warning
cp -r "$T/nvfp4" "$T/nv-listed"
python3 -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['quantization_config']['ignore'] = ['lm_head', 're:model\\.layers\\.[0-9]+\\.self_attn\\.k_proj', 'model.layers.*.mlp.gate_prj']; json.dump(c, open(p, 'w'))" \
    "$T/nv-listed/config.json"
out=$(e "lint $T/nv-listed")
ok "lint: a listed FP4 module is an error" has "$out" "error .*model.layers.0.self_attn.k_proj is stored in FP4 but quantization_config lists it as not quantized ('re:model.*'; 5 modules like it)"
ok "lint: an entry naming nothing is a warning" has "$out" "warning .*quantization_config.ignore entry 'model.layers.\*.mlp.gate_prj' names no module"
ok "lint: the regex and lm_head name something" hasnt "$out" "entry '\(re:\|lm_head\)"
cp -r "$T/mxfp4" "$T/mx-listed"
python3 -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['quantization_config']['modules_to_not_convert'] = ['lm_head', 'model.layers.*.mlp.up_proj']; json.dump(c, open(p, 'w'))" \
    "$T/mx-listed/config.json"
ok "lint: a glob listing MXFP4 modules is an error" has "$(e "lint $T/mx-listed")" "model.layers.0.mlp.up_proj is stored in FP4 but .*('model.layers.\*.mlp.up_proj'; 5 modules"

# ---- hostile scales
$Q "$SRC" "$T/nan" nvfp4 nan-scale
run -e "load $T/nan"
ok "NaN NVFP4 block scale refused" test "$(rc)" != 0
ok "... naming the tensor and the block" has "$(cat err.txt)" "NVFP4 tensor 'model.layers.0.self_attn.k_proj.weight': block scale \[0, 0\] (code 0x7f) is NaN"
$Q "$SRC" "$T/nanmx" mxfp4 nan-scale
run -e "load $T/nanmx"
ok "NaN E8M0 scale (0xFF) refused" has "$(cat err.txt)" "MXFP4 tensor 'model.layers.0.self_attn.k_proj.weight': block scale \[0, 0\] (code 0xff) is NaN"
$Q "$SRC" "$T/short" mxfp4 short-scale
run -e "load $T/short"
ok "MXFP4 scales of the wrong shape refused" has "$(cat err.txt)" "'model.layers.0.self_attn.k_proj.weight_scales' should be U8 (E8M0) of shape \[32, 2\]"
ok "lint: MXFP4 scales of the wrong shape" has "$(e "lint $T/short")" "k_proj.weight_scales is U8 \[32, 1\]; MXFP4 scales (E8M0, one per 32 values) are U8 \[32, 2\]"
$Q "$SRC" "$T/shortnv" nvfp4 short-scale
run -e "load $T/shortnv"
ok "NVFP4 scales of the wrong shape refused" has "$(cat err.txt)" "'model.layers.0.self_attn.k_proj.weight_scale' should be F8_E4M3 of shape \[32, 4\]"
ok "lint: NVFP4 scales of the wrong shape" has "$(e "lint $T/shortnv")" "k_proj.weight_scale is F8_E4M3 \[32, 3\]; NVFP4 block scales (one per 16 values) are F8_E4M3 \[32, 4\]"
cli_done
