#!/usr/bin/env bash
# cli_fp8ct_export.sh -- `export DIR dtype fp8` of a per-tensor / per-channel FP8 source (compressed-
# tensors "float-quantized": Llama-3.1-70B-Instruct-FP8, Qwen3-32B-FP8 static per tensor; fp8ct.h), on
# stories260K-hf quantized by tests/fp8ct_quant.py (which the old binary refused, naming the tensor):
#  - the rewritten weights are F8_E4M3 in the source's strategy, their "<w>_scale" in the source's
#    shape ([], [1], [R, 1]) and dtype (F32 / BF16); each unit's scale is the source's times 2^k with
#    the unit's largest value in (224, 448] x scale (an all-zero row keeps its scale), and every value is
#    the F32 export's value rounded to E4M3 at that scale;
#  - a static source keeps every FP8 module's input_scale bit for bit (v_proj, q / k_proj: the input it
#    calibrates is unchanged); o_proj after a VO cut (its input is the factors' values) is written BF16,
#    with no scales, and joins `ignore` (and the manifest's bf16_modules); a dynamic source keeps it FP8;
#  - the same for ModelOpt FP8 (hf_quant_config.json, quant_algo FP8: o_proj joins exclude_modules);
#  - every other tensor is the source's byte for byte (sha256), and so are the rows of a per-channel
#    weight the cut leaves alone (Phi-3's fused qkv_proj: its q / k rows) with their scales; the
#    config's config_groups unchanged;
#  - the export lints with no error but the source's own (transformers and vLLM load it), loads back in attnlab, `check`
#    passes (its fused maps within FP8's error) and its perplexity is the session's within 1e-3.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-fp8ct-export
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
P="python3 $ATTNLAB_SRC/tests"

e "synth family phi3 $T/phi3" >/dev/null          # Phi-3's fused qkv_proj: its q / k rows are left alone by a VO cut
python3 -c "print(' '.join(str((i * 37 + 11) % 256) for i in range(200)))" >"$T/ids.txt"
pplv() { awk '/^------  -------  -------$/ { getline; print $3 }' | tail -1; }

# source-name strategy writer-mode truncation model
for spec in "tensor tensor - vo s" "tensor1 tensor bf16 vo s" "channel channel - vo s" "channel-bf16 channel bf16 vo s" \
            "channel-dyn channel dynamic vo s" "phi-channel channel - vo p" "phi-tensor tensor bf16 vo p" \
            "modelopt tensor - vo s"; do
    set -- $spec
    k=$1 cut=$4 from=$SRC ppl="ppl $TXT" arch=LlamaForCausalLM fam=llama
    [ $5 = p ] && from=$T/phi3 ppl="ppl ids $T/ids.txt seqlen 40" arch=Phi3ForCausalLM fam=phi3
    $P/fp8ct_quant.py "$from" "$T/$k" $2 "${3#-}"
    [ $k = modelopt ] && python3 - "$T/$k" <<'PY'     # ModelOpt FP8: the same tensors, its config in hf_quant_config.json
import json, sys
c = json.load(open(sys.argv[1] + '/config.json'))
del c['quantization_config']
json.dump(c, open(sys.argv[1] + '/config.json', 'w'), indent=2)
json.dump({'producer': {'name': 'modelopt', 'version': '0.29.0'}, 'quantization': {'quant_algo': 'FP8',
           'kv_cache_quant_algo': None, 'exclude_modules': ['lm_head']}}, open(sys.argv[1] + '/hf_quant_config.json', 'w'))
PY
    run -e "load $T/$k; truncate $cut tau 0.9 layers 1; export $T/ex-$k format dense dtype fp8; $ppl"
    ok "$k: exported (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0
    out=$(cat out.txt)
    ok "$k: the rewritten weights re-encoded in FP8" has "$out" "layer 1) F8_E4M3 -> F8_E4M3: added error"
    p0=$(pplv <out.txt)
    e "load $T/$k; truncate $cut tau 0.9 layers 1; export $T/f32-$k format dense dtype f32" >/dev/null
    out=$(e "lint $T/ex-$k; load $T/ex-$k; $ppl; check $T/ex-$k")
    ok "$k: lint finds no error but the source's (no tokenizer files: llama.cpp)" \
        test "$(grep "^  [0-9]*\. error" <<<"$out" | sed 's/^  [0-9]*\. //')" = "$(e "lint $T/$k" | grep "^  [0-9]*\. error" | sed 's/^  [0-9]*\. //')"
    ok "$k: transformers loads it" has "$out" "^transformers  *$arch  *loads$"
    ok "$k: vLLM loads it" has "$out" "^vLLM  *$arch  *loads\( with --skip-tokenizer-init .*\)\?$"
    ok "$k: attnlab loads it" has "$out" "^loaded ex-$k: $fam"
    ok "$k: check passes" has "$out" "^PASS: the export's fused maps are the plan's"
    p1=$(pplv <<<"$out")
    ok "$k: the reload's ppl ($p1) is the session's ($p0) within 2e-3" near "${p1:-0}" "${p0:-1}" 0.002
    msg=$(python3 - "$T/$k" "$T/ex-$k" "$T/f32-$k" $2 "$3" $4 <<'PY'
import hashlib, json, math, struct, sys
from st_tensors import tensors, e4m3
srcd, exd, f32d, strat, mode, cut = sys.argv[1:7]
src, ex, f32 = tensors(srcd), tensors(exd), tensors(f32d)
static = mode != 'dynamic'
L1 = 'model.layers.1.self_attn.'
rew = ['qkv_proj' if L1 + 'qkv_proj.weight' in src else 'v_proj', 'o_proj']
fp8 = [p for p in rew if not (static and p == 'o_proj')]
bad, kept = [], 0
def sha(t): return hashlib.sha256(json.dumps(t[:2]).encode() + t[2]).hexdigest()
def floats(dt, data):
    if dt == 'F32': return struct.unpack('<%df' % (len(data) // 4), data)
    return [struct.unpack('<f', b'\0\0' + data[i:i + 2])[0] for i in range(0, len(data), 2)]
mine = {L1 + p + s for p in rew for s in ('.weight', '.weight_scale', '.input_scale')}
same = [n for n in src if n not in mine and n in ex and sha(src[n]) == sha(ex[n])]
bad += ['%s changed' % n for n in src if n not in mine and n not in same]
bad += ['%s added' % n for n in ex if n not in src]
for p in rew:
    w = L1 + p + '.weight'
    dt, shape, data = ex[w]
    if p not in fp8:
        bad += [] if dt == 'BF16' else ['%s is %s, not BF16' % (w, dt)]
        bad += ['%s kept' % n for n in (L1 + p + '.weight_scale', L1 + p + '.input_scale') if n in ex]
        continue
    sd, ss, sb = ex[w + '_scale']
    want = floats('F32', f32[w][2])
    if dt != 'F8_E4M3' or (sd, ss) != tuple(src[w + '_scale'][:2]):
        bad.append('%s: %s, its scale %s %s (the source: %s %s)' % (w, dt, sd, ss, *src[w + '_scale'][:2]))
        continue
    if static and sha(ex[L1 + p + '.input_scale']) != sha(src[L1 + p + '.input_scale']):
        bad.append(p + ' input_scale not the source\'s')
    if not static and L1 + p + '.input_scale' in ex: bad.append(p + ' has an input_scale')
    R, C = shape
    new, old = floats(sd, sb), floats(*src[w + '_scale'][::2])
    if len(new) == R:   # per channel: a row whose values the cut leaves (Phi-3's q / k rows) keeps its codes and scale
        sw = src[w][2]
        for r in range(R):
            dec = [struct.unpack('<f', struct.pack('<f', e4m3(b) * old[r]))[0] for b in sw[r * C:(r + 1) * C]]
            if dec == list(want[r * C:(r + 1) * C]):
                kept += 1
                if sw[r * C:(r + 1) * C] != data[r * C:(r + 1) * C] or new[r] != old[r]: bad.append('%s row %d recoded' % (w, r))
    unit = (lambda r: 0) if len(new) == 1 else (lambda r: r)
    for u in range(len(new)):
        k = math.log2(new[u] / old[u])
        rows = range(R) if len(new) == 1 else [u]
        amax = max(abs(want[r * C + c]) for r in rows for c in range(C))
        if k != round(k): bad.append('%s scale %d: %g is not the source\'s %g x 2^k' % (w, u, new[u], old[u]))
        if amax > 0 and not 224 * new[u] < amax * (1 + 1e-6) <= 448 * new[u] * (1 + 1e-5):
            bad.append('%s scale %d: amax %g not in (224, 448] x %g' % (w, u, amax, new[u]))
        if amax == 0 and new[u] != old[u]: bad.append('%s: zero row %d changed its scale' % (w, u))
    for i, b in enumerate(data):
        s, v, got = new[unit(i // C)], want[i], e4m3(b) * new[unit(i // C)]
        if abs(got - v) > max(abs(v) / 16, s / 1024) * (1 + 1e-6):
            bad.append('%s[%d]: %g for %g at scale %g' % (w, i, got, v, s)); break
def qcfg(d):
    c = json.load(open(d + '/config.json'))
    if 'quantization_config' in c: return c['quantization_config']
    q = json.load(open(d + '/hf_quant_config.json'))['quantization']        # ModelOpt
    return dict(q, ignore=q['exclude_modules'], config_groups=q['quant_algo'])
q, qs = qcfg(exd), qcfg(srcd)
if q['config_groups'] != qs['config_groups']: bad.append('config_groups changed')
ign = [L1 + 'o_proj'] if static and cut == 'vo' else []
if [x for x in q['ignore'] if x not in qs['ignore']] != ign: bad.append('ignore %s' % q['ignore'])
man = json.load(open(exd + '/farr_manifest.json'))['reencoded']
if man.get('bf16_modules', []) != ign: bad.append('manifest bf16_modules %s' % man.get('bf16_modules'))
print('; '.join(bad[:6]) or 'ok %d untouched, %d rows kept' % (len(same), kept))
PY
)
    ok "$k: rewritten in the source's form, the rest byte for byte [$msg]" has "$msg" "^ok [0-9]"
    [ $k = phi-channel ] && ok "$k: the 192 q / k rows of qkv_proj kept with their codes and scales [$msg]" has "$msg" " 192 rows kept"
done
cli_done
