#!/usr/bin/env bash
# cli_farr_fp8.sh -- FaRR exports of an FP8 checkpoint keep what the truncation did not touch
# (issue 25, 2): every tensor, FP8 block, scale and row it does not change is the source's bit for
# bit (layers truncate reports unchanged, K rows of kv_b_proj); the changed tensors are BF16 by
# default (scales dropped, modules listed in quantization_config.modules_to_not_convert), or f32,
# or fp8 with every unchanged block and scale kept and the added error printed; the export line
# says what it re-encoded; `check DIR` recognises and PASSes every FaRR export of demo-r1 (formats
# hf, factors, dense; dtypes default, bf16, f32, fp8) and of demo-r1-bf16.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-farr-fp8 shared-cache
cd "$T" || exit 1
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"   # st_tensors.py: a folder's tensors as bytes

# st_cmp SRC DIR MODE: compares the tensors of DIR with those of SRC (pure Python, no numpy). Every
# tensor outside the attention weights of layers 2-3 (kv_b_proj, o_proj and their scales) must be
# byte-identical; MODE bf16: those weights are BF16 without scales and listed as not quantized;
# MODE fp8: they stay FP8, kv_b_proj's scales and K rows (32 of each head's 64 rows) are
# byte-identical. Prints one line per finding; nothing when all holds.
st_cmp() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, os, sys
from st_tensors import tensors
src, ex, mode = tensors(sys.argv[1]), tensors(sys.argv[2]), sys.argv[3]
changed = lambda k: any('layers.%d.self_attn.%s' % (L, p) in k for L in (2, 3) for p in ('kv_b_proj', 'o_proj'))
same = 0
for k, v in src.items():
    if changed(k):
        continue
    if ex.get(k) != v:
        print('untouched tensor differs:', k)
    else:
        same += 1
if same < 100:
    print('only %d tensors compared' % same)
keep = json.load(open(os.path.join(sys.argv[2], 'config.json')))['quantization_config'].get('modules_to_not_convert', [])
if mode == 'bf16' and 'lm_head' not in keep:   # a listed config drops transformers' default (lm_head)
    print('lm_head not kept unquantized:', keep)
for L in (2, 3):
    for p in ('kv_b_proj', 'o_proj'):
        k = 'model.layers.%d.self_attn.%s.weight' % (L, p)
        if mode == 'bf16':
            if ex[k][0] != 'BF16' or k + '_scale_inv' in ex or k[:-7] not in keep:
                print('%s: %s, scale %s, not-quantized list %s' % (k, ex[k][0], k + '_scale_inv' in ex, keep))
        else:
            # kv_b_proj's new V rows fit the old scales; o_proj's new columns need them doubled
            if ex[k][0] != 'F8_E4M3' or (p == 'kv_b_proj' and ex.get(k + '_scale_inv') != src[k + '_scale_inv']) or keep:
                print('%s: %s; scales kept: %s' % (k, ex[k][0], ex.get(k + '_scale_inv') == src[k + '_scale_inv']))
    k = 'model.layers.%d.self_attn.kv_b_proj.weight' % L
    a, b = src[k][2], ex[k][2]
    rows = lambda d, j0: [d[(h * 64 + j0 + j) * 96:(h * 64 + j0 + j + 1) * 96] for h in range(8) for j in range(32)]
    if mode == 'fp8' and rows(a, 0) != rows(b, 0):
        print('layer %d: K rows of kv_b_proj not byte-identical' % L)
    if mode == 'fp8' and rows(a, 32) == rows(b, 32):
        print('layer %d: V rows unchanged (the cut did not reach the export)' % L)
PY
}

cut="truncate vo tau 0.999 policy layer-max"
src=$(e "load demo-r1; info" | awk '$1 == "path" {print $2}')
[ -d "$src" ] || fail "demo-r1's folder: [$src]"
# ---- the issue's repro: layers 0, 1, 4, 5 are unchanged (rank 32 of 32), layers 2-3 cut
out=$(e "load demo-r1; $cut; export d0 format dense; check d0")
ok "repro: check PASSes" has "$out" "PASS: the export's fused maps are the plan's"
ok "repro: no FAIL" hasnt "$out" "FAIL"
ok "repro: only layers 2-3 rewritten" has "$out" "115 tensors copied bit for bit, 4 rewritten"
ok "repro: the export line says what it re-encoded" \
    has "$out" "re-encoded 4 changed tensors (self_attn.kv_b_proj.weight, self_attn.o_proj.weight; layers 2-3) F8_E4M3 -> BF16"
ok "repro: the export line says the scales went" has "$out" "their _scale_inv dropped and their modules listed in quantization_config.modules_to_not_convert"
diffs=$(st_cmp "$src" d0 bf16)
[ -z "$diffs" ] || fail "default (BF16) export: $diffs"

out=$(e "load demo-r1; $cut; export d8 format dense dtype fp8; check d8")
ok "fp8: check PASSes" has "$out" "PASS: the export's fused maps are the plan's"
ok "fp8: the added error is printed" has "$out" "F8_E4M3 -> F8_E4M3: added error 0.0"
diffs=$(st_cmp "$src" d8 fp8)
[ -z "$diffs" ] || fail "fp8 export: $diffs"

# ---- fp8, per-head ranks: layer 1 keeps heads 1, 3, 5, 7 whole (rank 32) beside cut heads 0, 2, 4, 6
# that share their FP8 blocks (4 heads per o_proj column block, 2 per kv_b_proj row block): the
# whole heads' rows and columns, every K row and both weights' scales are the source's bytes
out=$(e "load demo-r1; truncate vo tau 0.999 policy head; export h8 format dense dtype fp8; check h8")
ok "fp8 per head: check PASSes" has "$out" "PASS: the export's fused maps are the plan's"
diffs=$(python3 - "$src" h8 <<'PY'
import json, os, sys
from st_tensors import tensors
a, b = ({k: v[2] for k, v in tensors(d).items()} for d in sys.argv[1:3])
ranks = json.load(open(os.path.join(sys.argv[2], 'farr_manifest.json')))['truncations'][0]['per_layer'][1]['ranks']
if ranks != [6, 32] * 4:
    print('layer 1 ranks', ranks)
kv, o = 'model.layers.1.self_attn.kv_b_proj.weight', 'model.layers.1.self_attn.o_proj.weight'
for w in (kv, o):
    if a[w + '_scale_inv'] != b[w + '_scale_inv']:
        print(w, 'scales changed')
row = lambda t, r: t[kv][r * 96:(r + 1) * 96]
col = lambda t, h: [t[o][i * 256 + h * 32:i * 256 + h * 32 + 32] for i in range(320)]
for h in range(8):
    if any(row(a, h * 64 + j) != row(b, h * 64 + j) for j in range(32)):
        print('head', h, 'K rows changed')
    whole = h % 2 == 1
    if whole != all(row(a, h * 64 + 32 + j) == row(b, h * 64 + 32 + j) for j in range(32)):
        print('head', h, 'V rows', 'changed' if whole else 'unchanged')
    if whole != (col(a, h) == col(b, h)):
        print('head', h, 'o_proj columns', 'changed' if whole else 'unchanged')
PY
)
[ -z "$diffs" ] || fail "fp8 per-head export: $diffs"

# ---- fp8 of a QK cut (layers 1-3): kv_b_proj's V rows stay the source's bytes in every layer
out=$(e "load demo-r1; truncate qk tau 0.999 policy head; export q8 format dense dtype fp8; check q8")
ok "fp8 QK: check PASSes" has "$out" "PASS: the export's fused maps are the plan's"
diffs=$(python3 - "$src" q8 <<'PY'
import sys
from st_tensors import tensors
kv = lambda d: {k: v[2] for k, v in tensors(d, lambda k: k.endswith('kv_b_proj.weight')).items()}
a, b = kv(sys.argv[1]), kv(sys.argv[2])
for k in sorted(a):
    if a[k] == b[k]:
        continue
    for h in range(8):
        if a[k][(h * 64 + 32) * 96:(h * 64 + 64) * 96] != b[k][(h * 64 + 32) * 96:(h * 64 + 64) * 96]:
            print(k, 'head', h, 'V rows changed')
PY
)
[ -z "$diffs" ] || fail "fp8 QK export: $diffs"

# ---- every format and dtype of demo-r1 (hf needs one rank over the model), and demo-r1-bf16
for fmt in hf factors dense; do
    t=$cut
    [ $fmt = hf ] && t="truncate vo rank 8 policy model-max; truncate qk rank 16 policy model-max"
    for dt in "" bf16 f32 fp8; do
        out=$(e "load demo-r1; $t; export x-$fmt-$dt format $fmt ${dt:+dtype $dt}; check x-$fmt-$dt")
        if [ $fmt = hf ] && [ "$dt" = fp8 ]; then   # hf moves the K rows into other blocks: refused, not re-quantized
            ok "demo-r1 hf fp8: refused, saying why" has "$out" "cannot be kept and would be re-quantized"
            ok "demo-r1 hf fp8: nothing written" test ! -e x-hf-fp8
            continue
        fi
        ok "demo-r1 $fmt ${dt:-default}: recognised" hasnt "$out" "not an attnlab export"
        ok "demo-r1 $fmt ${dt:-default}: PASS" has "$out" "PASS: the export's fused maps are the plan's"
    done
    out=$(e "load demo-r1-bf16; $t; export y-$fmt format $fmt; check y-$fmt")
    ok "demo-r1-bf16 $fmt: PASS" has "$out" "PASS: the export's fused maps are the plan's"
done
# a factors export checked from a fresh session (the source named by the manifest)
out=$(e "check x-factors-")
ok "check DIR of a factors export in a fresh session" has "$out" "PASS"
out=$(e "load demo-r1-bf16; $cut; export z dtype fp8")
ok "fp8 of a BF16 source refused" has "$out" "dtype fp8 keeps an FP8 checkpoint's blocks"
ok "nothing written" test ! -e z
# a cut that changes nothing says that the dtype asked re-encoded nothing (it said only "0 rewritten")
out=$(e "load demo-r1; truncate vo tau 0.999 policy model-max; export nochange format hf dtype bf16")
ok "nothing to re-encode: said" has "$out" "dtype bf16: nothing re-encoded: the cut changed no tensor"
cli_done
