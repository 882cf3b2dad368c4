#!/bin/bash
# cli_kvnorm.sh -- the demo model with TransMLA's key-norm concentration (demo-kvnorm, issue 15
# items 16 and 18) and the TransMLA figures' refusal on a model that is already MLA:
#   - `synth demo-kvnorm DIR` and `load demo-kvnorm` (a cached demo like the others), listed in
#     `help synth` and `help load`;
#   - `plot kv-balance`: alpha (RMS NoPE key / RMS value) and RMS key / RMS value over all key dims
#     far from 1 on demo-kvnorm (about 8 and 20), near 1 on demo-llama (0.83, 0.90);
#   - the concentration serves the conversion: most key energy stays in the RoPE dims, and KV
#     balancing lowers the attention-output error of `convert mla` (it raises it on demo-llama);
#   - the figures are written (PNG, and SVG with the legend's alpha as text);
#   - `plot kv-balance|key-norms|rope-energy|rope-removal` on demo-r1 (MLA) say why they refuse and
#     what to load instead.
set -u
: "${ATTNLAB_SRC:?ATTNLAB_SRC must name the source tree}"
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-kvnorm shared-cache
unset DISPLAY
cd "$T" || exit 1
# gt A B: A > B as numbers
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 > b + 0) }'; }
# num OUT KEY LAYER: the number after "layer LAYER: KEY = " in OUT
num() { sed -n "s/^layer $3: $2 = \([0-9.e+-]*\).*/\1/p" <<<"$1" | head -1; }

# ---- the demo is written and listed like the others
out=$(e "synth demo-kvnorm kv")
ok "synth demo-kvnorm exits 0" test $? -eq 0
ok "synth demo-kvnorm: BF16, one shard" has "$out" "wrote demo-kvnorm (BF16, 1 shard, seed 42)"
ok "config: 4 KV heads" grep -q '"num_key_value_heads":[[:space:]]*4' kv/config.json
ok "config: provenance demo-kvnorm" grep -q '"kind":[[:space:]]*"demo-kvnorm"' kv/config.json
ok "help synth lists demo-kvnorm" has "$(e "help synth")" "demo-kvnorm"
ok "help synth demo-kvnorm says what is planted" has "$(e "help synth demo-kvnorm")" "key-norm concentration"
ok "help load lists demo-kvnorm" has "$(e "help load")" "demo-kvnorm"

# ---- plot kv-balance: far from 1 on demo-kvnorm, near 1 on demo-llama
out=$(e "load demo-kvnorm; plot kv-balance layer 0 to kvb0.png; plot kv-balance layer 1 to kvb1.svg; plot key-norms layer 0 to kn0.png")
ok "kv-balance / key-norms on demo-kvnorm exit 0" test $? -eq 0
ok "loaded as a demo" has "$out" "loaded demo-kvnorm: llama, 2 layers, 8 heads (4 KV)"
for L in 0 1; do
    a=$(num "$out" alpha $L)
    r=$(num "$out" "RMS key \/ RMS value" $L)
    ok "demo-kvnorm layer $L: alpha $a > 5" gt "$a" 5
    ok "demo-kvnorm layer $L: RMS key / RMS value $r > 10" gt "$r" 10
done
ok "kv-balance PNG" is_png kvb0.png
ok "key-norms PNG" is_png kn0.png
ok "kv-balance SVG" is_svg kvb1.svg
txt=$(python3 -c "import re, html; print('|'.join(html.unescape(x) for x in re.findall(r'<tspan[^>]*>([^<]*)', open('kvb1.svg').read())))" 2>/dev/null)
ok "kv-balance SVG: alpha in the legend, as text (freqfold 1, convert mla's)" has "$txt" "after balancing (α = 6\.78)"
out=$(e "load demo-llama; plot kv-balance layer 1 to llama.png")
a=$(num "$out" alpha 1)
r=$(num "$out" "RMS key \/ RMS value" 1)
ok "demo-llama layer 1: alpha $a below 1.2" gt 1.2 "$a"
ok "demo-llama layer 1: RMS key / RMS value $r below 1.5" gt 1.5 "$r"

# ---- what the concentration does to the conversion
out=$(e "load demo-kvnorm; convert mla kv-rank 64")
ok "convert mla on demo-kvnorm exits 0" test $? -eq 0
# columns: layer alpha rope_energy joint_energy score_err out_err joint_energy_other score_err_other out_err_other
rows=$(awk '$1 ~ /^[01]$/ && NF == 9' <<<"$out")
ok "two layer rows" test "$(wc -l <<<"$rows")" -eq 2
ok "RoPE dims keep > 0.8 of the key energy" awk '{ if ($3 <= 0.8) exit 1 }' <<<"$rows"
ok "balancing lowers out_err (balanced < unbalanced)" awk '{ if ($6 >= $9) exit 1 }' <<<"$rows"

# ---- already MLA: the TransMLA figures say why and what to do
for fig in kv-balance key-norms rope-energy; do
    out=$(e "load demo-r1; plot $fig layer 0 to x.png")
    ok "$fig on demo-r1: refused" test $? -ne 0
    ok "$fig on demo-r1: names the command" has "$out" "error: plot $fig: demo-r1 is already MLA"
    ok "$fig on demo-r1: why" has "$out" "no GQA key heads to merge, rotate or balance"
    ok "$fig on demo-r1: what to load" has "$out" "load demo-llama"
    hasnt "$out" "TransMLA merge" || fail "$fig on demo-r1: core's message leaked [$out]"
done
out=$(e "load demo-r1; plot rope-removal ids x.txt")
ok "rope-removal on demo-r1: refused before reading the text" has "$out" "plot rope-removal: demo-r1 is already MLA"
ok "no figure written" test ! -e x.png

cli_done
