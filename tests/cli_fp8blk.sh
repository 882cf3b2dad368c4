#!/usr/bin/env bash
# cli_fp8blk.sh -- fine-grained FP8 of publishers other than DeepSeek (tensor.h, quant_config.h):
# stories260K-hf with its projections written by tests/fp8blk_quant.py (pure Python, its own E4M3 table)
# as F8_E4M3 "<w>" times "<w>_scale_inv" per 128 x 128 block -- every weight here has partial edge
# blocks (64 x 64 in one block; down_proj's 172 columns in 128 + 44) -- with the grid in F32 under
# MiniMax-M2's config (fmt float8_e4m3fn), in BF16 (Qwen3-*-FP8), as F8_E8M0 bytes (DeepSeek-V4), and
# as F32 powers of two under DeepSeek-V3.2's scale_fmt ue8m0, and as compressed-tensors' FP8_BLOCK
# (strategy "block": the F32 grid named weight_scale; down_proj's [1, 2] and up_proj's [2, 1] grids are
# not per-row scales), beside F32 twins holding the values
# Python decoded: `ranks vo` / `ranks qk` and `ppl` (f32 and bf16 compute) print the same as on the
# twin. A NaN in a BF16 or F32 grid and E8M0's code 0xFF are refused naming the tensor and the block;
# under ue8m0 a scale of 0.3 is refused at load; weight_block_size [64, 64] is refused naming the key.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-fp8blk
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
Q="python3 $ATTNLAB_SRC/tests/fp8blk_quant.py"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"

analyses() {
    e "load $1 as m; ranks vo tau 0.9; ranks qk offset 4 tau 0.9; ppl $TXT; set compute bf16; ppl $TXT" |
        grep -v "^loaded\|^ppl of\|tok/s\|^compute bf16 asked"
}

for k in f32 bf16 e8m0 ue8m0 ct; do
    $Q "$SRC" "$T/$k" $k && $Q "$SRC" "$T/$k-f32" $k twin
    ok "$k: written" test -f "$T/$k/model.safetensors" -a -f "$T/$k-f32/model.safetensors"
    a=$(analyses "$T/$k")
    b=$(analyses "$T/$k-f32")
    ok "$k: ranks and ppl printed" test "$(grep -c . <<<"$a")" -gt 90
    ok "$k: ranks and ppl equal the F32 twin's" test "$a" = "$b"
    [ "$a" = "$b" ] || diff <(echo "$a") <(echo "$b") | head -5
    ok "$k: ppl 3.7-3.9 (the F32 model: 3.73)" has "$a" "^  1127  1.3[0-9]*  3\.[78]"
done
ok "compressed-tensors FP8_BLOCK (the grid as weight_scale) reads as the same grid under weight_scale_inv" \
    test "$(analyses "$T/ct")" = "$(analyses "$T/f32")"
ok "ct lint: transformers loads it (a block grid is a compressed-tensors FP8 scale)" has "$(e "lint $T/ct")" \
    "^transformers  *LlamaForCausalLM  *loads$"
ok "BF16 grid and F32 grid decode differently" test "$(analyses "$T/bf16")" != "$(analyses "$T/f32")"
ok "E8M0 bytes and ue8m0 F32 powers of two: the same scales, the same numbers" \
    test "$(analyses "$T/e8m0")" = "$(analyses "$T/ue8m0")"
out=$(e "load $T/ue8m0; info")
ok "info: ue8m0 named, and the key" has "$out" \
    "^quantization  *fp8: FP8 with block scales (weight_scale_inv), scale_fmt ue8m0 (config.json quantization_config.quant_method)$"
for k in bf16 e8m0; do
    ok "$k lint: transformers loads it (the grid's dtype is read)" has "$(e "lint $T/$k")" "^transformers  *LlamaForCausalLM  *loads$"
done
ok "info: E8M0 grid read as FP8 block scales" has "$(e "load $T/e8m0; info")" "^weights  *attention F8_E4M3, mlp F8_E4M3"

# ---- export of a truncation on the BF16 grid: untouched tensors and their BF16 grids bit for bit
out=$(e "load $T/bf16; truncate vo tau 0.9 layers 1; export $T/ex format dense; load $T/ex as d; info")
ok "export: 4 rewritten (v / o_proj, and q / k_proj: vLLM fuses q/k/v), the rest copied" has "$out" "^exported VO of bf16 to .*tensors copied bit for bit, 4 rewritten"
msg=$(python3 - "$T/bf16" "$T/ex" <<'PY'
import json, os, sys
sys.path.insert(0, os.environ['ATTNLAB_SRC'] + '/tests')
from st_tensors import tensors
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
mods = ['model.layers.1.self_attn.' + p for p in ('k_proj', 'o_proj', 'q_proj', 'v_proj')]   # q / k: fused with v in vLLM
ch = lambda k: any(k.startswith(m + '.') for m in mods)
bad = [k for k in a if not ch(k) and b.get(k) != a[k]]
bad += [k for k in b if ch(k) and not (k.endswith('.weight') and b[k][0] == 'BF16')]
bad += [] if a['model.layers.0.self_attn.q_proj.weight_scale_inv'][0] == 'BF16' else ['source grid not BF16']
q = json.load(open(os.path.join(sys.argv[2], 'config.json')))['quantization_config']
bad += [] if q.get('modules_to_not_convert') == mods else [str(q)]
print(' '.join(bad))
PY
)
ok "export: untouched bit for bit with their BF16 grids, rewritten BF16 without scales, listed [$msg]" test -z "$msg"
ok "export: loads, the config checked (quantization line)" has "$out" "^quantization  *fp8: FP8 with block scales"

# ---- hostile scales: refused naming the tensor and the block
for spec in "bf16 nan-scale is nan:" "f32 nan-scale is nan:" "e8m0 e8m0-255 is nan (E8M0 code 0xff):"; do
    set -- $spec
    $Q "$SRC" "$T/h-$1-$2" $1 $2
    run -e "load $T/h-$1-$2; ppl $TXT"
    ok "$1 $2: refused" test "$(rc)" != 0
    shift 2
    ok "... naming the tensor and the block" has "$(cat err.txt)" \
        "'model.layers.0.self_attn.k_proj.weight_scale_inv' block \[0, 0\] $* an FP8 block scale must be finite"
done
$Q "$SRC" "$T/np" ue8m0 not-pow2
run -e "load $T/np"
ok "ue8m0: a scale of 0.3 refused at load" has "$(cat err.txt)" \
    "'model.layers.0.self_attn.k_proj.weight_scale_inv' block \[0, 0\] is 0.3, not a power of two, but quantization_config.scale_fmt is \"ue8m0\""
ok "lint says so too" has "$(e "lint $T/np")" "error .*is 0.3, not a power of two"
python3 - "$T/ue8m0/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c['quantization_config']['weight_block_size'] = [64, 64]; json.dump(c, open(sys.argv[1], 'w'))
PY
run -e "load $T/ue8m0"
ok "weight_block_size [64, 64] refused naming the key" has "$(cat err.txt)" \
    "quantization_config.weight_block_size is \[64, 64\]: attnlab reads FP8 block scales of \[128, 128\]"
cli_done
