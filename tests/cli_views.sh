#!/bin/bash
# cli_views.sh -- issue 15's analysis views end to end (demo models, stdin /dev/null, no display):
#   1  one W_Q / W_K head on a full-RoPE model: `spectrum q|k`, `plot spectrum|energy|heatmap q|k`
#      work (the whole projection; its singular values are the weight's), fused qk stays refused,
#      and seed000_head.lua runs on a Llama model;
#   2  the seed notebooks pick their layers and write their captions from the data (demo-llama
#      has no mixed layer and flat W_Q heads: the notebooks say so instead of demo-r1's captions);
#   11 `ranks ... order rank`, `ranks ... summary` (min / median / max per layer, the heads holding
#      them), the summary by default on the terminal past 64 rows (the result still every head);
#      `plot vo-ranks ... order head|rank`;
#   13 `ranks ... model NAME` without switching, `diff ranks`, `plot ranks-by-layer ... models A,B`;
#   16 `plot kv-balance` (TransMLA Figure 4a) and labelled head separators on `plot key-norms`;
#   18 `plot spectrum ... log` has its own default file name; SVG keeps text as <text> (PLplot's svg
#      driver); a log axis of two decades or less gets 2 and 5 labels between the decades.
set -u
: "${ATTNLAB_SRC:?ATTNLAB_SRC must name the source tree}"
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-views shared-cache
unset DISPLAY
cd "$T" || exit 1

# ---- 1: single Q / K heads on full RoPE
out=$(e "load demo-llama; spectrum q layer 1 head 3; spectrum k layer 1 head 3 to k.csv")
ok "spectrum q|k on demo-llama exits 0" test $? -eq 0
ok "spectrum q: the whole 256 x 32 W_Q" has "$out" "W_Q of layer 1 head 3: 256 x 32, 32 singular values"
ok "spectrum k: written" test "$(wc -l <k.csv)" -eq 33
out=$(e "load demo-llama; spectrum qk layer 1 head 3")
ok "fused qk on full RoPE still refused" test $? -ne 0
ok "fused qk: the reason" has "$out" "QK fusion refused"
out=$(e "load demo-llama; plot spectrum q layer 0 head 2 to q.png; plot energy k layer 0 head 2 to k.png; plot heatmap q layer 0 head 2 factor scaled to h.png; plot heatmap k layer 0 head 2 to hk.png")
ok "plot spectrum|energy|heatmap q|k on demo-llama exit 0" test $? -eq 0
for f in q k h hk; do ok "$f.png written" is_png "$f.png"; done
ok "energy of W_K: ranks reported" has "$out" "effective rank at tau = 0.999: 32 of 32"
# the spectrum is the weight's own: the same as seen through `offset` (a rotation of K's columns)
a=$(e "load demo-llama; spectrum k layer 2 head 5" | awk '$1 == 1 {print $2}')
b=$(e "load demo-llama; ranks qk layer 2 offset 0; spectrum k layer 2 head 5 offset 0" | awk '$1 == 1 {print $2}')
ok "W_K's sigma_1 alone ($a) = through the offset-0 fusion ($b)" test -n "$a" -a "$a" = "$b"

# ---- 1 + 2: the head notebook on a Llama model picks its head and says the heads are flat
out=$("$ATTNLAB" "$ATTNLAB_SRC/scripts/seed000_head.lua" "$T/head" demo-llama </dev/null 2>&1)
ok "seed000_head on demo-llama exits 0" test $? -eq 0
ok "seed000_head: 5 figures" has "$out" "5 figures in $T/head"
ok "seed000_head: no traceback" hasnt "$out" "traceback"
ok "seed000_head: caption from the data (flat W_Q)" has "$out" "no weak tail in this model's W_Q heads"
ok "seed000_head: demo-r1's caption is not printed" hasnt "$out" "a few strong directions"
ok "seed000_head: the energy figure" is_png "$T/head/1.4_energy.png"
out=$("$ATTNLAB" "$ATTNLAB_SRC/scripts/seed000_head.lua" "$T/head_r1" </dev/null 2>&1)
ok "seed000_head on demo-r1: the planted head" has "$out" "on demo-r1, layer 2 query head 0"
ok "seed000_head on demo-r1: the tail is named" has "$out" "then a weak tail of 14"

# ---- 2: the layers notebook on demo-llama: its cases from the ranks, the missing one said
out=$("$ATTNLAB" "$ATTNLAB_SRC/scripts/seed000_layers.lua" "$T/layers" demo-llama </dev/null 2>&1)
ok "seed000_layers on demo-llama exits 0" test $? -eq 0
ok "seed000_layers: 4 figures (no mixed layer)" has "$out" "4 figures in $T/layers"
ok "seed000_layers: the missing case said" has "$out" "no layer of this kind in demo-llama: a split layer"
ok "seed000_layers: bottleneck caption with the ranks found" has "$out" "layer 1 -- bottleneck.*V 6, O 32, fused VO 6 of 32"
ok "seed000_layers: full-rank case is layer 0 (not the lowest-rank layer)" has "$out" "layer 0 -- the common case"
ok "seed000_layers: no mixed figure" test ! -e "$T/layers/2.3_mixed_split.png"
out=$("$ATTNLAB" "$ATTNLAB_SRC/scripts/seed000_grids.lua" "$T/grids" demo-llama </dev/null 2>&1)
ok "seed000_grids on demo-llama exits 0" test $? -eq 0
ok "seed000_grids: caption from the ranks" has "$out" "fused VO 4-32 over 32 heads"
ok "seed000_grids: QK skipped with the reason" has "$out" "skipped.*QK fusion refused"

# ---- 11: head identity and the per-layer summary
out=$(e "load demo-r1; ranks vo 3 order rank")
ok "order rank: layer 3's odd heads (fused 3) first" test "$(awk '$1 == 3 {print $2}' <<<"$out" | head -4 | tr '\n' ' ')" = "1 3 5 7 "
out=$(e "load demo-r1; ranks vo all summary")
ok "summary: one row per layer" test "$(grep -cE '^ +[0-9]+ +8 ' <<<"$out")" -eq 6
ok "summary: columns" has "$out" "rank_vo_min  rank_vo_median  rank_vo_max  head_min  head_max"
ok "summary: layer 3 min 3 (head 1), median 4.5, max 6 (head 0)" has "$out" "^ *3 *8 *6 *31 *31 *32 *3 *4.5 *6 *1 *0$"
e "load demo-r1; ranks vo all summary to sum.csv" >/dev/null
ok "summary to CSV" test "$(head -1 sum.csv)" = "layer,heads,rank_v_min,rank_v_max,rank_o_min,rank_o_max,rank_vo_min,rank_vo_median,rank_vo_max,head_min,head_max"
out=$(e "load demo-r1; lua print(#attn.ranks('vo', 'all', {summary = true}), #attn.ranks('vo', 'all'))")
ok "Lua: summary 6 rows, full 48" has "$out" "^6	48$"
"$ATTNLAB" -e "synth ds-r1-shape $T/r1s layers 1" >/dev/null 2>&1
out=$(e "load $T/r1s; ranks vo all")
ok "128 rows on the terminal: the summary instead" has "$out" "128 rows: one row per layer shown"
ok "128 rows: one summary row" test "$(grep -cE '^ +0 +128 ' <<<"$out")" -eq 1
out=$(e "load $T/r1s; ranks vo all heads")
ok "heads: every row" test "$(grep -cE '^ +0 +[0-9]+ ' <<<"$out")" -eq 128
out=$(e "load $T/r1s; lua print(#attn.ranks('vo', 'all'))")
ok "Lua still gets all 128 rows" has "$out" "^128$"
e "load $T/r1s; ranks vo all to all.csv" >/dev/null
ok "to FILE.csv: all 128 rows" test "$(wc -l <all.csv)" -eq 129
rm -rf "$T/r1s"
out=$(e "load demo-r1; plot vo-ranks layer 3 to sorted.png; plot vo-ranks layer 3 order head to byhead.png; plot vo-ranks all order head to grid.png")
ok "order rank|head figures exit 0" test $? -eq 0
for f in sorted byhead grid; do ok "$f.png written" is_png "$f.png"; done
ok "the two orders differ" test "$(cmp -s sorted.png byhead.png; echo $?)" -ne 0

# ---- 13: several models side by side
out=$(e "load demo-llama; ranks vo all model demo-r1 summary; info")
ok "ranks model NAME exits 0" test $? -eq 0
ok "ranks model NAME: that model's ranks" has "$out" "demo-r1: VO effective ranks at tau 0.999, layers 0-5"
ok "ranks model NAME: the current model is unchanged" has "$out" "^name  *demo-llama$"
out=$(e "diff ranks vo demo-r1 demo-r1-bf16 layers 1-3 to d.csv")
ok "diff ranks exits 0" test $? -eq 0
ok "diff ranks: the count" has "$out" "A = demo-r1, B = demo-r1-bf16; 0 of 24 heads differ"
ok "diff ranks: columns" test "$(head -1 d.csv)" = "layer,head,rank_v_a,rank_v_b,rank_o_a,rank_o_b,rank_vo_a,rank_vo_b,delta"
ok "diff ranks: 24 rows" test "$(wc -l <d.csv)" -eq 25
out=$(e "diff ranks vo demo-r1 demo-llama")
ok "diff of different shapes: refused" test $? -ne 0
ok "diff of different shapes: says what to do" has "$out" "plot ranks-by-layer vo models demo-r1,demo-llama"
out=$(e "load demo-r1; plot ranks-by-layer vo models demo-r1,demo-llama to models.png; plot ranks-by-layer vo models demo-r1,demo-llama stat median to med.png; models")
ok "ranks-by-layer models exits 0" test $? -eq 0
ok "models: one figure" is_png models.png
ok "models stat median: another" is_png med.png
ok "models: demo-r1 still current" has "$out" "^demo-llama  *false"
out=$(e "load demo-r1; plot ranks-by-layer vo models demo-r1")
ok "models: one name refused" has "$out" "two or more names"

# ---- 18: the log spectrum does not overwrite the linear one's default file
out=$(e "load demo-r1; set plot.dir $T/auto; plot spectrum vo layer 2 head 0; plot spectrum vo layer 2 head 0 log")
ok "linear and log spectra: two files" test "$(ls "$T/auto" | grep -c spectrum)" -eq 2
ok "the log one ends in -log" test -f "$T/auto/demo-r1-spectrum-vo-L2-H0-log.png"

e "load demo-r1; plot spectrum vo layer 0 head 0 log to s.svg" >/dev/null
ok "SVG: text is text" grep -q "<text" s.svg
txt=$(python3 -c "import re, html; print('|'.join(html.unescape(x) for x in re.findall(r'<tspan[^>]*>([^<]*)', open('s.svg').read())))" 2>/dev/null)
ok "SVG: the title is readable text" has "$txt" "demo-r1 layer 0 head 0: singular values of fused W_V W_O"
ok "log axis over two decades: 0.2, 0.5, 2 and 5 labelled" has "$txt" "|0.2|0.5|2|5|"

# ---- 16: TransMLA Figure 4a, and labelled head separators on key-norm figures
out=$(e "load demo-llama; plot kv-balance layer 1 to kvb.png; plot kv-balance layer 1 to kvb.svg; plot key-norms layer 1 to kn.svg")
ok "plot kv-balance exits 0" test $? -eq 0
ok "kv-balance: PNG" is_png kvb.png
ok "kv-balance: alpha reported" has "$out" "layer 1: alpha = "
txt=$(python3 -c "import re, html; print('|'.join(html.unescape(x) for x in re.findall(r'<tspan[^>]*>([^<]*)', open('kvb.svg').read())))" 2>/dev/null)
ok "kv-balance: before and after in the legend" has "$txt" "NoPE keys, before balancing|.*NoPE keys / α, after balancing (α = "
ok "kv-balance: values" has "$txt" "values (unchanged)"
txt=$(python3 -c "import re, html; print('|'.join(html.unescape(x) for x in re.findall(r'<tspan[^>]*>([^<]*)', open('kn.svg').read())))" 2>/dev/null)
ok "key-norms: head separators labelled" has "$txt" "KV head 0|KV head 1"
out=$(e "load demo-r1; plot kv-balance layer 0")
ok "kv-balance on MLA: refused" test $? -ne 0

cli_done
