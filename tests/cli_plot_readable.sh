#!/bin/bash
# cli_plot_readable.sh -- what a reader reads off the rank figures, from their SVG text:
# - a hybrid (synth nemotron_h, "M*EM*-": attention at layers 1 and 4, Mamba-2 / MoE / MLP blocks
#   between): `plot ranks-by-layer` and the grid say which layers they draw and what the others
#   are, and ranks-by-layer's x axis is the layers asked for (0-5), those without attention shaded
#   and named in its legend (its lines break there: tests/test_plot.c checks the pixels);
# - the grid of per-head ranks sorted by rank (`plot vo-ranks all` on demo-r1): under each panel
#   the ids of its heads in that panel's order -- the order `ranks vo all` gives (fused rank, then
#   head id) --, never the sort positions, and the x label says so; in head order (`order head`)
#   the ticks are the ids 0..7.
# - the other figures of a hybrid: head-importance labels its rows with their layer numbers (1, 4),
#   not row positions; compare names the layers it leaves out;
# - plot attention says which axis is queries and which keys; key-norms shows its y label once,
#   whole (it once printed two halves of it over each other); esd's log x axis of less than a
#   decade has numbers (PLplot labels only the decades), and its subtitle, too long for one line,
#   wraps outside its parentheses ("no power-law fit (6 eigenvalues; it needs 10)" stays whole).
# stdin is /dev/null throughout.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-plot-readable
unset DISPLAY

# ---- a hybrid: the layers drawn, said; the gap shaded and named
run -e "synth family nemotron_h nh; load nh; plot ranks-by-layer vo to nh-bl.svg; plot vo-ranks all to nh-grid.svg; plot ranks-by-layer vo models nh,demo-r1 to nh-models.svg"
ok "nemotron_h: the figures are drawn" test "$(rc)" = 0
bl=$(svg_texts nh-bl.svg | tr '\n' ' ')
note="layers 0, 2-3, 5 are Mamba-2 (SSM) or MLP / MoE blocks without attention: drawing the 2 attention layers 1, 4"
ok "ranks-by-layer: the subtitle says which layers are drawn [$bl]" has "$bl" "$note"
ok "ranks-by-layer: the legend names the shaded gap" has "$bl" "no attention heads"
ok "ranks-by-layer: the gaps are shaded (#EFEFEF)" grep -qi 'fill="#EFEFEF"' nh-bl.svg
ok "ranks-by-layer: the x axis is the whole model's layers 0-5" test "$(svg_texts nh-bl.svg | grep -x '[0-9]' | head -6 | tr '\n' ' ')" = "0 1 2 3 4 5 "
ok "grid: the subtitle says which layers are drawn" has "$(svg_texts nh-grid.svg | tr '\n' ' ')" "$note"
ok "grid: panels L1 and L4" test "$(svg_texts nh-grid.svg | grep -x 'L[0-9]*' | tr '\n' ' ')" = "L1 L4 "
ok "several models: the hybrid's layers are named" \
    has "$(svg_texts nh-models.svg | tr '\n' ' ')" "nh: attention layers 1, 4 only (the others: Mamba-2 (SSM) or MLP / MoE blocks without attention)"

# ---- the sorted grid: head ids under each panel, in the panel's order
run -e "set format csv; load demo-r1; ranks vo all; plot vo-ranks all to grid.svg; plot vo-ranks all order head to grid-head.svg"
ok "demo-r1: ranks and grids" test "$(rc)" = 0
head -1 out.txt | grep -q '^layer,head,' || fail "ranks vo all CSV header: [$(head -1 out.txt)]"
fcol=$(head -1 out.txt | tr ',' '\n' | grep -nx 'rank_vo' | cut -d: -f1)
[ -n "$fcol" ] || fail "no rank_vo column in [$(head -1 out.txt)]"
svg_texts grid.svg >grid.txt
sorted_any=0
for L in 0 1 2 3 4 5; do
    # this layer's heads by fused rank, then head id: what the panel's numbers must read
    want=$(awk -F, -v L="$L" -v c="${fcol:-3}" 'NR > 1 && $1 == L { print $c, $2 }' out.txt | sort -k1,1n -k2,2n |
        awk '{ printf "%s ", $2 }')
    [ "$want" != "0 1 2 3 4 5 6 7 " ] && sorted_any=1
    got=$(grep -x -B8 "L$L" grid.txt | head -8 | tr '\n' ' ')
    ok "grid L$L: the numbers under its panel are its head ids by rank [$want] (got [$got])" test "$got" = "$want"
done
ok "some layer's rank order is not the head order (the check can tell)" test "$sorted_any" = 1
ok "grid: the x label says the numbers are head ids" grep -q "numbers under each panel: head ids" grid.txt
ok "grid, head order: the bottom panels' ticks are ids 0, 4, 7, thrice" \
    test "$(svg_texts grid-head.svg | grep -B3 -x 'L[345]' | grep -x '[0-9]' | tr '\n' ' ')" = "0 4 7 0 4 7 0 4 7 "
ok "grid, head order: the x label says head id" grep -qx "head id" <(svg_texts grid-head.svg)

# ---- the hybrid's other figures
cli_ids 60 ids.txt
run -e "load nh; plot head-importance ids ids.txt to nh-imp.svg; plot compare to nh-cmp.svg"
ok "nemotron_h: head-importance and compare drawn" test "$(rc)" = 0
imp=$(svg_texts nh-imp.svg)
# each grid: heads 0-3 across, then its rows' numbers, then the axis title
ok "head-importance: rows labelled with layers 1 and 4, not row positions [$(tr '\n' ' ' <<<"$imp")]" \
    test "$(tr '\n' ' ' <<<"$imp" | grep -o '0 1 2 3 1 4 head' | wc -l)" = 2
ok "head-importance: the y label says attention layers only" has "$imp" "layer (its attention layers only)"
ok "compare: the subtitle names the layers left out" \
    has "$(svg_texts nh-cmp.svg | tr '\n' ' ')" "layers 2-3 are Mamba-2 (SSM) or MLP / MoE blocks without attention: drawing the 2 attention layers 1, 4"

# ---- attention, key-norms, esd on demo-llama / demo-r1
run -e "load demo-llama; plot attention ids ids.txt max-tokens 12 layer 1 head 0 to att.svg; plot key-norms layer 1 to kn.svg; load demo-r1; plot esd vo layer 1 head 0 to esd.svg"
ok "attention, key-norms, esd drawn" test "$(rc)" = 0
att=$(svg_texts att.svg)
ok "attention: the rows are queries" grep -qx "query token (attending)" <<<"$att"
ok "attention: the columns are keys" grep -qx "key token (attended to)" <<<"$att"
kn=$(svg_texts kn.svg)
ok "key-norms: the y label once, whole" test "$(grep -cx 'RMS key (real above, imaginary below)' <<<"$kn")" = 1
ok "key-norms: no half labels drawn over each other" hasnt "$kn" "(Re)"
ok "esd: the x axis of under a decade has numbers (0.02 0.03 0.04)" \
    test "$(svg_texts esd.svg | grep -x '0.0[234]' | tr '\n' ' ')" = "0.02 0.03 0.04 "
run -e "load demo-llama; plot esd vo layer 1 head 0 to esd-wrap.svg"
ew=$(svg_texts esd-wrap.svg)
ok "esd: the long subtitle wraps at a clause [$(grep 'power-law' <<<"$ew")]" \
    grep -qx "stable rank 6, no power-law fit (6 eigenvalues; it needs 10), 0 above the MP edge" <<<"$ew"
ok "esd: no line of the subtitle ends inside a parenthesis [$(grep 'power-law' <<<"$ew")]" \
    test "$(python3 -c 'import sys; print(sum(l.count("(") != l.count(")") for l in sys.stdin))' <<<"$ew")" = 0

cli_done
