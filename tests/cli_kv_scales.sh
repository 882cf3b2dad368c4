#!/usr/bin/env bash
# cli_kv_scales.sh -- a static FP8 KV cache's per-layer k_scale / v_scale (compressed-tensors'
# kv_cache_scheme; quant_fused.h: quant_kv_scale) through a FaRR export and `lint`, on stories260K-hf
# quantized by tests/fp8ct_quant.py ... kv (per-tensor FP8 weights, "self_attn.k_scale" 0.25 and
# "self_attn.v_scale" 0.125 + L / 64 in every layer):
#  - `truncate vo ... layers 1; export` drops layer 1's k_scale and v_scale (calibrated on the values
#    the cut changes; vLLM copies one found alone to the other, so both go) and says so in its line
#    and the manifest (kv_scales_dropped); every other layer's are the source's byte for byte; dtype
#    fp8 alike;
#  - `info` counts the layers with scales and says ppl keeps the cache unquantized;
#  - `lint` places the scales (vLLM maps them onto the attention; the old lint called them tensors no
#    engine places, an error for every target), warns on the export's layer without scales (vLLM and
#    SGLang use 1.0 there), on a layer with only one of the two, and on an export that kept the stale
#    scales of a cut layer (farr_manifest.json).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-kv-scales
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
python3 "$ATTNLAB_SRC/tests/fp8ct_quant.py" "$SRC" "$T/kv" tensor kv

# names of the KV scales in folder $1, one line
kvnames() { python3 -c "
import sys
from st_tensors import tensors
print(' '.join(sorted(n[len('model.layers.'):] for n in tensors(sys.argv[1]) if n.endswith(('k_scale', 'v_scale')))))" "$1"; }
all="0.self_attn.k_scale 0.self_attn.v_scale 1.self_attn.k_scale 1.self_attn.v_scale 2.self_attn.k_scale 2.self_attn.v_scale 3.self_attn.k_scale 3.self_attn.v_scale 4.self_attn.k_scale 4.self_attn.v_scale"
ok "the source has the scales of every layer [$(kvnames "$T/kv")]" test "$(kvnames "$T/kv")" = "$all"

ok "info: the source's scales in every layer" has "$(e "load $T/kv; info")" \
    "^kv_cache_scales  *k_scale / v_scale in 5 of 5 layers (a static FP8 KV cache for engines run with --kv-cache-dtype fp8); ppl and generate keep the cache unquantized$"
out=$(e "lint $T/kv")
ok "lint: the scales are placed, not 'no tensors of' [$(grep k_scale <<<"$out")]" hasnt "$out" "k_scale.*no tensors of"
ok "lint: vLLM loads the source" has "$out" "^vLLM  *LlamaForCausalLM  *loads\( with --skip-tokenizer-init (or --tokenizer naming the source)\)\?$"
ok "lint: no KV scale finding on the source" hasnt "$out" "KV cache scales"

run -e "load $T/kv; truncate vo tau 0.9 layers 1; export $T/ex format dense; load $T/ex; ppl $TXT"
out=$(cat out.txt)
ok "export ran (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0
ok "the line says which scales were dropped and why" \
    has "$out" "^dropped 2 static KV cache scales (k_scale / v_scale) of layer 1: calibrated on keys and values the cut changes; vLLM and SGLang take 1.0 there"
want="0.self_attn.k_scale 0.self_attn.v_scale 2.self_attn.k_scale 2.self_attn.v_scale 3.self_attn.k_scale 3.self_attn.v_scale 4.self_attn.k_scale 4.self_attn.v_scale"
ok "layer 1's k_scale and v_scale dropped, the others kept [$(kvnames "$T/ex")]" test "$(kvnames "$T/ex")" = "$want"
msg=$(python3 -c "
import sys
from st_tensors import tensors
s, x = tensors(sys.argv[1]), tensors(sys.argv[2])
print(' '.join(n for n in x if n.endswith('_scale') and 'layers.1.' not in n and x[n] != s[n]))" "$T/kv" "$T/ex" 2>&1)
ok "the kept scales are the source's bytes [$msg]" test -z "$msg"
man=$(python3 -c "import json, sys; k = json.load(open(sys.argv[1]))['kv_scales_dropped']; print(k['tensors'], k['layers'])" \
      "$T/ex/farr_manifest.json" 2>&1)
ok "the manifest records them [$man]" test "$man" = "2 [1, 1]"
ok "the export loads and runs in attnlab" has "$out" "^loaded ex: llama"

ok "info: the export's in 4 of 5" has "$(e "load $T/ex; info")" "^kv_cache_scales  *k_scale / v_scale in 4 of 5 layers"
ok "info: no such row without scales" hasnt "$(e "load $SRC; info")" "kv_cache_scales"
out=$(e "lint $T/ex")
ok "lint of the export: vLLM uses 1.0 on layer 1" \
    has "$out" "warning  vLLM, SGLang: KV cache scales: layer 1 has no k_scale / v_scale while the other attention layers have them: with an FP8 KV cache vLLM and SGLang use 1.0 there"
ok "lint of the export: no stale-scale finding" hasnt "$out" "keeps* k_scale / v_scale calibrated"

out=$(e "load $T/kv; truncate vo tau 0.9 layers 1; export $T/ex8 format dense dtype fp8")
ok "dtype fp8: the same two dropped" has "$out" "^dropped 2 static KV cache scales (k_scale / v_scale) of layer 1"
ok "dtype fp8: the same tensors kept [$(kvnames "$T/ex8")]" test "$(kvnames "$T/ex8")" = "$want"

# what the old export wrote: the cut layer keeps its source scales
python3 - "$T/kv" "$T/ex" "$T/stale" <<'PY'
import os, shutil, sys
from st_tensors import tensors, write_tensors
src, ex, dst = sys.argv[1:4]
shutil.copytree(ex, dst)
s, x = tensors(src), tensors(ex)
for n in ('k_scale', 'v_scale'):
    x['model.layers.1.self_attn.' + n] = s['model.layers.1.self_attn.' + n]
for f in os.listdir(dst):
    if f.endswith('.safetensors'): os.remove(os.path.join(dst, f))
write_tensors(os.path.join(dst, 'model.safetensors'), sorted(x.items()))
PY
out=$(e "lint $T/stale")
ok "lint: an export that kept the cut layer's scales is flagged" \
    has "$out" "warning  vLLM, SGLang: KV cache scales: layer 1 keeps k_scale / v_scale calibrated on the source's keys and values, which this FaRR export's cut changed"

# a layer with v_scale alone
python3 - "$T/kv" "$T/half" <<'PY'
import os, shutil, sys
from st_tensors import tensors, write_tensors
src, dst = sys.argv[1:3]
shutil.copytree(src, dst)
s = tensors(src)
del s['model.layers.2.self_attn.k_scale']
os.remove(os.path.join(dst, 'model.safetensors'))
write_tensors(os.path.join(dst, 'model.safetensors'), sorted(s.items()))
PY
out=$(e "lint $T/half")
ok "lint: a layer with one of the two" \
    has "$out" "warning  vLLM, SGLang: KV cache scales: layer 2 has only one of k_scale / v_scale"
# a static scheme whose scales are all gone (what convert mla's export wrote before it dropped the scheme too)
python3 - "$T/kv" "$T/noscale" <<'PY'
import os, shutil, sys
from st_tensors import tensors, write_tensors
src, dst = sys.argv[1:3]
shutil.copytree(src, dst)
s = {n: v for n, v in tensors(src).items() if not n.endswith(('k_scale', 'v_scale'))}
os.remove(os.path.join(dst, 'model.safetensors'))
write_tensors(os.path.join(dst, 'model.safetensors'), sorted(s.items()))
PY
out=$(e "lint $T/noscale")
ok "lint: a static kv_cache_scheme with no scales at all" \
    has "$out" "warning  vLLM, SGLang: KV cache scales: quantization_config.kv_cache_scheme is static but no layer has a k_scale / v_scale"
ok "lint: not on the source" hasnt "$(e "lint $T/kv")" "kv_cache_scheme is static but no layer"
cli_done
