#!/usr/bin/env bash
# cli_fused_quant_qk.sh -- the fused-shard rule's QK side end to end (quant_fused.h; cli_fused_quant.sh
# has the VO side): `truncate qk` of SmolLM3's NoPE layer 3 (cli_qk_nope.sh) on a synthetic smollm3
# quantized as compressed-tensors FP8 per tensor (with a static KV cache), ModelOpt NVFP4, compressed-
# tensors NVFP4 and pack-quantized INT4. The cut rewrites q_proj and k_proj (written BF16); v_proj, which
# vLLM fuses with them into qkv_proj and which the cut leaves unchanged, is written BF16 too (the
# source's decoded values rounded to BF16, its scales dropped) and the three join the source's ignore
# list; o_proj and every other tensor are the source's bytes. The export's line and manifest name
# v_proj; lint says vLLM loads it with no split fused layer; the reload fuses at rank 2 in layer 3,
# `check` passes and its perplexity is the session's within 1e-3. Under the static KV cache, layer 3's
# k_scale / v_scale / q_scale are dropped (the keys and queries changed).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-fused-quant-qk
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
P="python3 $ATTNLAB_SRC/tests"
e "synth family smollm3 $T/sm3" >/dev/null
seq 1 40 | tr '\n' ' ' >"$T/ids.txt"
ppl="ppl ids $T/ids.txt"
pplv() { awk '/^tokens  *nll  *ppl$/ { getline; getline; print $3 }' | tail -1; }
cut="truncate qk rank 2 layers 3"

for k in ct8 nvfp4 ctnvfp4 int4; do
    case $k in
        ct8) $P/fp8ct_quant.py "$T/sm3" "$T/$k" tensor kv ;;
        int4) $P/int4ct_quant.py "$T/sm3" "$T/$k" ;;
        *) $P/fp4_quant.py "$T/sm3" "$T/$k" $k ;;
    esac
    run -e "load $T/$k; $cut; export $T/ex-$k format dense; $ppl"
    out=$(cat out.txt)
    ok "$k: exported (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0
    ok "$k: q / k rewritten and v_proj with them" has "$out" \
        "^re-encoded 3 changed tensors (self_attn.k_proj.weight, self_attn.q_proj.weight, self_attn.v_proj.weight; layer 3) [A-Z0-9_]* -> BF16"
    ok "$k: the line names v_proj as the fused sibling" has "$out" \
        "^1 of them (self_attn.v_proj.weight) unchanged by the cut but written BF16 too and listed unquantized: vLLM fuses them"
    p0=$(pplv <out.txt)
    e "load $T/$k; $cut; export $T/f32-$k format dense dtype f32" >/dev/null
    msg=$(python3 - "$T/$k" "$T/ex-$k" "$T/f32-$k" <<'PY'
import json, struct, sys
from st_tensors import tensors
src, ex, f32 = (tensors(d) for d in sys.argv[1:4])
def bf16(x):
    u = struct.unpack('<I', struct.pack('<f', x))[0]
    return struct.pack('<H', ((u + 0x7fff + ((u >> 16) & 1)) >> 16) & 0xffff)
bad = []
a = 'model.layers.3.self_attn.'
for p in ('q_proj', 'k_proj', 'v_proj'):
    n = a + p + '.weight'
    if ex[n][0] != 'BF16': bad.append(n + ' is ' + ex[n][0])
    left = [m for m in ex if m.startswith(a + p + '.') and m != n]
    if left: bad.append('left beside ' + p + ': ' + ' '.join(left))
dt, shape, data = f32[a + 'v_proj.weight']
if ex[a + 'v_proj.weight'][2] != b''.join(bf16(v) for v in struct.unpack('<%df' % (len(data) // 4), data)):
    bad.append('v_proj is not the decoded source rounded to BF16')
for n in src:
    if n.startswith(tuple(a + p + '.' for p in ('q_proj', 'k_proj', 'v_proj'))):
        continue
    if n.startswith('model.layers.3.self_attn.') and n.endswith(('k_scale', 'v_scale', 'q_scale')):
        if n in ex: bad.append('stale ' + n)
        continue
    if ex.get(n) != src[n]: bad.append(n + ' not the source bytes')
ign = json.load(open(sys.argv[2] + '/config.json'))['quantization_config']['ignore']
for p in ('q_proj', 'k_proj', 'v_proj'):
    if a + p not in ign: bad.append(p + ' not in ignore')
if a + 'o_proj' in ign: bad.append('o_proj listed')
man = json.load(open(sys.argv[2] + '/farr_manifest.json'))['reencoded']
if man.get('fused_siblings') != ['self_attn.v_proj.weight']: bad.append('manifest %s' % man.get('fused_siblings'))
print(' '.join(bad[:6]))
PY
2>&1)
    ok "$k: v_proj decoded in BF16, q/k/v listed, o_proj and the rest the source's [$msg]" test -z "$msg"
    out=$(e "lint $T/ex-$k; load $T/ex-$k; ranks qk layer 3 tau 0.999999; $ppl; check $T/ex-$k")
    ok "$k: lint: vLLM loads the export" has "$out" "^vLLM  *SmolLM3ForCausalLM  *loads\( with --skip-tokenizer-init .*\)\?$"
    ok "$k: lint: no split fused layer" hasnt "$out" "some but not all\|not all quantized alike"
    ok "$k: the reload fuses at rank 2 in layer 3" test "$(grep -c '^    3     [0-3]       2       2        2$' <<<"$out")" = 4
    ok "$k: check passes" has "$out" "^PASS: the export's fused maps are the plan's"
    p1=$(pplv <<<"$out")
    ok "$k: the reload's perplexity is the session's within 1e-3 ($p1 vs $p0)" near "$p1" "$p0" 1e-3
done
out=$(e "load $T/ct8; $cut; export $T/ex2-ct8 format dense")
ok "ct8: the static KV cache's scales of layer 3 dropped" has "$out" \
    "^dropped 2 static KV cache scales (k_scale / v_scale) of layer 3"
cli_done
