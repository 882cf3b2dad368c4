#!/usr/bin/env bash
# cli_fused_quant.sh -- quantized folders and the layers vLLM fuses (core/io/quant_fused.h): vLLM (and
# SGLang) fuse q/k/v_proj into qkv_proj and gate/up_proj into gate_up_proj and refuse a fused layer
# whose shards the quantization config leaves some quantized and some not (is_layer_skipped: "Detected
# some but not all shards ... are quantized"; compressed-tensors' should_ignore_layer: "vLLM requires all
# to use the same scheme"); transformers builds each module alone and loads it.
#  - lint: hand-made folders from stories260K-hf, one per quantization method -- compressed-tensors
#    FP8 (`ignore`), ModelOpt FP8 (hf_quant_config.json `exclude_modules`), fine-grained FP8
#    (`modules_to_not_convert`) -- with some shards of one fused layer dequantized and listed: an
#    error naming the layer, the shards and the fused layer; vLLM and SGLang will not load it,
#    transformers does; every shard listed: no such error, vLLM loads it;
#  - export (default dtype: BF16) after a VO cut of an FP8 / NVFP4 source: v_proj is rewritten in BF16
#    and listed unquantized, so q_proj and k_proj of that layer (unchanged by the cut) are written
#    BF16 too (their values the source's decoded ones rounded to BF16, their scales dropped) and
#    listed with it (ignore / modules_to_not_convert; manifest: reencoded.fused_siblings; said in the
#    export's line); the export's lint says vLLM loads it; every other tensor is the source's byte for
#    byte; `check` passes and the reload's perplexity is the session's within 1e-3; with dtype fp8 the
#    shards all stay FP8 and nothing more is written unquantized.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-fused-quant
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
P="python3 $ATTNLAB_SRC/tests"
pplv() { awk '/^------  -------  -------$/ { getline; print $3 }' | tail -1; }

# plain DIR KEY MODULE...: the modules' FP8 weights decoded to F32 (scales and input_scale dropped) and
# added to the config's list KEY (hf: hf_quant_config.json's exclude_modules)
plain() {
    python3 - "$@" <<'PY'
import json, os, struct, sys
from st_tensors import tensors, write_tensors, e4m3
d, key, mods = sys.argv[1], sys.argv[2], sys.argv[3:]
t = tensors(d)
def floats(dt, b):
    if dt == 'F32': return struct.unpack('<%df' % (len(b) // 4), b)
    return [struct.unpack('<f', b'\0\0' + b[i:i + 2])[0] for i in range(0, len(b), 2)]
for m in mods:
    n = m + '.weight'
    dt, (R, C), data = t[n]
    assert dt == 'F8_E4M3', n
    sn = n + '_scale_inv' if n + '_scale_inv' in t else n + '_scale'
    sdt, sshape, sdata = t.pop(sn)
    s = floats(sdt, sdata)
    def sc(r, c):
        if len(s) == 1: return s[0]
        if sshape == [R, 1]: return s[r]
        return s[(r // 128) * ((C + 127) // 128) + c // 128]
    vals = [e4m3(data[r * C + c]) * sc(r, c) for r in range(R) for c in range(C)]
    t[n] = ('F32', [R, C], struct.pack('<%df' % (R * C), *vals))
    t.pop(m + '.input_scale', None)
write_tensors(os.path.join(d, 'model.safetensors'), sorted(t.items()))
if key == 'hf':
    p = os.path.join(d, 'hf_quant_config.json')
    h = json.load(open(p))
    h['quantization']['exclude_modules'] = (h['quantization'].get('exclude_modules') or []) + mods
else:
    p = os.path.join(d, 'config.json')
    h = json.load(open(p))
    h['quantization_config'][key] = (h['quantization_config'].get(key) or []) + mods
json.dump(h, open(p, 'w'), indent=2)
PY
}
to_modelopt() {       # compressed-tensors FP8 per tensor -> ModelOpt FP8 (the same tensors; hf_quant_config.json)
    python3 - "$1" <<'PY'
import json, sys
c = json.load(open(sys.argv[1] + '/config.json'))
del c['quantization_config']
json.dump(c, open(sys.argv[1] + '/config.json', 'w'), indent=2)
json.dump({'producer': {'name': 'modelopt', 'version': '0.29.0'}, 'quantization': {'quant_algo': 'FP8',
           'kv_cache_quant_algo': None, 'exclude_modules': ['lm_head']}}, open(sys.argv[1] + '/hf_quant_config.json', 'w'))
PY
}
A=model.layers.1.self_attn M=model.layers.0.mlp
FUSE='vLLM and SGLang refuse a fused layer whose shards are not all quantized alike'

# ---- lint: one hand-made folder per quantization method
$P/fp8ct_quant.py "$SRC" "$T/ct" tensor
$P/fp8ct_quant.py "$SRC" "$T/mo" tensor && to_modelopt "$T/mo"
$P/fp8blk_quant.py "$SRC" "$T/fb" f32
out=$(e "lint $T/ct; lint $T/mo; lint $T/fb")
ok "the sources: no fused-layer error" hasnt "$out" "fuses with it"
ok "... vLLM loads all three" test "$(grep -c "^vLLM  *LlamaForCausalLM  *loads\( with --skip-tokenizer-init .*\)\?$" <<<"$out")" = 3
for spec in "ct ignore v_proj" "mo hf up_proj" "fb modules_to_not_convert q_proj,k_proj"; do
    set -- $spec
    cp -r "$T/$1" "$T/$1-mixed"
    if [ $3 = up_proj ]; then plain "$T/$1-mixed" $2 $M.up_proj
    else plain "$T/$1-mixed" $2 $(tr , '\n' <<<"$3" | sed "s/^/$A./"); fi
    out=$(e "lint $T/$1-mixed")
    case $3 in
        v_proj) msg="$A: the quantization config's ignore leaves v_proj unquantized but not q_proj, k_proj, which vLLM fuses with it into one qkv_proj layer (1 fused layers like it): $FUSE";;
        up_proj) msg="$M: the quantization config's exclude_modules leaves up_proj unquantized but not gate_proj, which vLLM fuses with it into one gate_up_proj layer (1 fused layers like it): $FUSE";;
        *) msg="$A: the quantization config's modules_to_not_convert leaves q_proj, k_proj unquantized but not v_proj, which vLLM fuses with it into one qkv_proj layer (1 fused layers like it): $FUSE";;
    esac
    ok "$1 ($2 lists $3): an error naming the layer and its shards" has "$out" "^  [0-9]*\. error    vLLM, SGLang: $msg"
    ok "$1: vLLM will not load it" has "$out" "^vLLM  *LlamaForCausalLM  *will not load  *1$"
    ok "$1: SGLang neither" has "$out" "^SGLang  *LlamaForCausalLM  *will not load  *1$"
    ok "$1: transformers loads it (no fusion)" has "$out" "^transformers  *LlamaForCausalLM  *loads$"
done
cp -r "$T/fb" "$T/fb-all" && plain "$T/fb-all" modules_to_not_convert $A.q_proj $A.k_proj $A.v_proj
out=$(e "lint $T/fb-all")
ok "fb, every shard of the layer listed: no fused-layer error" hasnt "$out" "fuses with it"
ok "... vLLM loads it" has "$out" "^vLLM  *LlamaForCausalLM  *loads\( with --skip-tokenizer-init .*\)\?$"
# two layers mixed: counted
cp -r "$T/ct" "$T/ct-two" && plain "$T/ct-two" ignore $A.v_proj model.layers.3.self_attn.k_proj
ok "two mixed layers: counted, the first named" has "$(e "lint $T/ct-two")" \
    "error    vLLM, SGLang: $A: the quantization config's ignore leaves v_proj unquantized but not q_proj, k_proj, .*(2 fused layers like it)"
# hostile: shards at the top level (no parent module): named, no crash
mkdir -p "$T/top"
python3 - "$T/top" <<'PY'
import json, os, struct, sys
from st_tensors import write_tensors
d = sys.argv[1]
write_tensors(os.path.join(d, 'model.safetensors'),
              sorted((n + '.weight', ('F32', [4, 4], struct.pack('<16f', *[0.5] * 16))) for n in ('q_proj', 'k_proj', 'v_proj')))
json.dump({'model_type': 'llama', 'architectures': ['LlamaForCausalLM'], 'quantization_config': {
    'quant_method': 'compressed-tensors', 'format': 'float-quantized', 'ignore': ['v_proj'], 'config_groups': {
        'group_0': {'targets': ['Linear'], 'weights': {'num_bits': 8, 'type': 'float', 'strategy': 'tensor'}}}}},
          open(os.path.join(d, 'config.json'), 'w'))
PY
run -e "lint $T/top"
ok "top-level shards: lint runs (rc $(rc))" test "$(rc)" = 0
ok "... and names them" has "$(cat out.txt)" "error    vLLM, SGLang: (top level): the quantization config's ignore leaves v_proj unquantized but not q_proj, k_proj"

# ---- export: the shards of a rewritten v_proj's fused layer written unquantized with it
for spec in "ct ignore" "fb modules_to_not_convert" "mo exclude_modules" "nv ignore"; do
    set -- $spec
    k=$1 key=$2
    [ $k = nv ] && $P/fp4_quant.py "$SRC" "$T/nv" nvfp4
    run -e "load $T/$k; truncate vo tau 0.9 layers 1; export $T/ex-$k format dense; ppl $TXT"
    ok "$k: exported (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0
    out=$(cat out.txt)
    ok "$k: the line says q_proj and k_proj are written BF16 too, and why" has "$out" \
        "^2 of them (self_attn.k_proj.weight, self_attn.q_proj.weight) unchanged by the cut but written BF16 too and listed unquantized: vLLM fuses them with a rewritten shard (q/k/v_proj into qkv_proj) and refuses a fused layer whose shards are not all quantized alike$"
    p0=$(pplv <out.txt)
    out=$(e "lint $T/ex-$k; load $T/ex-$k; ppl $TXT; check $T/ex-$k")
    ok "$k: the export's lint has no fused-layer error" hasnt "$out" "fuses with it"
    ok "$k: vLLM loads it" has "$out" "^vLLM  *LlamaForCausalLM  *loads\( with --skip-tokenizer-init .*\)\?$"
    ok "$k: SGLang too" has "$out" "^SGLang  *LlamaForCausalLM  *loads\( with --skip-tokenizer-init .*\)\?$"
    ok "$k: transformers too" has "$out" "^transformers  *LlamaForCausalLM  *loads$"
    ok "$k: check passes" has "$out" "^PASS: the export's fused maps are the plan's"
    p1=$(pplv <<<"$out")
    ok "$k: the reload's ppl ($p1) is the session's ($p0) within 1e-3" near "${p1:-0}" "${p0:-1}" 0.001
    msg=$(python3 - "$T/$k" "$T/ex-$k" $key <<'PY'
import json, os, struct, sys
from st_tensors import tensors
srcd, exd, key = sys.argv[1:4]
src, ex = tensors(srcd), tensors(exd)
L1 = 'model.layers.1.self_attn.'
bad = []
for n in ex:
    if n not in src: bad.append(n + ' new')
    elif not n.startswith(L1) and ex[n] != src[n]: bad.append(n + ' changed')
for n in src:
    if n not in ex and not n.startswith(L1): bad.append(n + ' dropped')
mods = [L1 + p for p in ('q_proj', 'k_proj', 'v_proj', 'o_proj')]
for m in mods:
    dt = ex.get(m + '.weight', ('missing',))[0]
    if dt != 'BF16': bad.append(m + ' is ' + dt)
    bad += [n + ' kept' for n in ex if n.startswith(m + '.') and n != m + '.weight']
if key == 'exclude_modules':
    lst = json.load(open(os.path.join(exd, 'hf_quant_config.json')))['quantization']['exclude_modules']
else:
    lst = json.load(open(os.path.join(exd, 'config.json')))['quantization_config'][key]
bad += [m + ' not in ' + key for m in mods if m not in lst]
man = json.load(open(os.path.join(exd, 'farr_manifest.json')))['reencoded']
if man.get('fused_siblings') != ['self_attn.k_proj.weight', 'self_attn.q_proj.weight']:
    bad.append('manifest fused_siblings %s' % man.get('fused_siblings'))
print(' '.join(bad))
PY
)
    ok "$k: layer 1's q/k/v/o BF16 without scales and listed; the manifest names q/k; all else byte-identical [$msg]" test -z "$msg"
done
# q_proj / k_proj hold the source's decoded values rounded to BF16 (the F32 export is exact)
e "load $T/ct; truncate vo tau 0.9 layers 1; export $T/f32-ct format dense dtype f32" >/dev/null
msg=$(python3 - "$T/ex-ct" "$T/f32-ct" <<'PY'
import struct, sys
from st_tensors import tensors
ex, f32 = tensors(sys.argv[1]), tensors(sys.argv[2])
def bf16(x):
    u = struct.unpack('<I', struct.pack('<f', x))[0]
    return struct.pack('<H', ((u + 0x7fff + ((u >> 16) & 1)) >> 16) & 0xffff)
bad = []
for p in ('q_proj', 'k_proj'):
    n = 'model.layers.1.self_attn.%s.weight' % p
    dt, shape, data = f32[n]
    if dt != 'F32': bad.append(n + ' f32 export is ' + dt); continue
    want = b''.join(bf16(v) for v in struct.unpack('<%df' % (len(data) // 4), data))
    if ex[n][2] != want: bad.append(n + ' not the decoded values in BF16')
print(' '.join(bad))
PY
)
ok "ct: q_proj / k_proj are the decoded FP8 values rounded to BF16 [$msg]" test -z "$msg"
out=$(e "load $T/fb; truncate vo tau 0.9 layers 1; export $T/fp8-fb format dense dtype fp8")
ok "fb dtype fp8: the shards stay FP8, nothing more written unquantized" hasnt "$out" "unchanged by the cut"
msg=$(python3 -c "
import sys
from st_tensors import tensors
s, x = tensors(sys.argv[1]), tensors(sys.argv[2])
n = 'model.layers.1.self_attn.q_proj.weight'
print('' if x[n] == s[n] and x[n + '_scale_inv'] == s[n + '_scale_inv'] else 'q_proj changed')" "$T/fb" "$T/fp8-fb")
ok "fb dtype fp8: q_proj and its scales byte-identical [$msg]" test -z "$msg"
cli_done
