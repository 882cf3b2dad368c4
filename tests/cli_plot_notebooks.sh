#!/bin/bash
# cli_plot_notebooks.sh -- the seed 000 notebooks (scripts/seed000_*.lua) run end to end on
# demo-r1: each exits 0, writes the figures it lists into the folder given on its command line,
# every listed figure is a PNG of the size the notebook set, and the printed ranks are the
# planted ones (W_Q of layer 2: 18 / 31 at 0.99 / 0.999 under FP8; fused VO of layer 2: 4).
set -u
: "${ATTNLAB_SRC:?ATTNLAB_SRC must name the source tree}"
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-plot-notebooks
unset DISPLAY

# notebook NAME COUNT: runs scripts/NAME.lua into $T/NAME, expects COUNT figures listed and
# written; leaves the output in $out.
notebook() {
    local name=$1 count=$2 dir="$T/$1"
    out=$("$ATTNLAB" "$ATTNLAB_SRC/scripts/$name.lua" "$dir" </dev/null 2>&1)
    local rc=$?
    ok "$name exits 0" test $rc -eq 0
    [ $rc -eq 0 ] || echo "$out" >&2
    ok "$name says how many figures" has "$out" "$count figures in $dir"
    local listed
    listed=$(grep -E "^  $dir/.*\.png$" <<<"$out" | sed 's/^  //')
    ok "$name lists $count figures" test "$(grep -c . <<<"$listed")" -eq "$count"
    ok "$name wrote $count PNGs" test "$(ls "$dir"/*.png 2>/dev/null | wc -l)" -eq "$count"
    local f
    while read -r f; do
        [ -n "$f" ] || continue
        ok "$name: $f is a PNG" is_png "$f"
    done <<<"$listed"
    ok "$name: no PLplot console output" hasnt "$out" "PLPLOT"
}

notebook seed000_head 5
ok "head: spectrum, factors and energy" test -f "$T/seed000_head/1.3d_wqb_scaled.png"
ok "head: 1200x800 as set" test "$(png_size "$T/seed000_head/1.4_energy.png")" = "1200x800"
ok "head: W_Q rank at 0.999 is the planted 31" has "$out" "effective rank at tau = 0.999: 31 of 32"

notebook seed000_layers 5
ok "layers: the three cases" test -f "$T/seed000_layers/2.3_case1_bottleneck.png" -a \
    -f "$T/seed000_layers/2.3_case2_low_when_fused.png" -a -f "$T/seed000_layers/2.3_case3_full_rank.png"
ok "layers: fused VO of the low-when-fused layer is rank 4" has "$out" "effective rank at tau = 0.999: 4 of 32"

notebook seed000_grids 4
ok "grids: VO and QK grids" test -f "$T/seed000_grids/2.4_vo_grid.png" -a -f "$T/seed000_grids/2.4_qk_grid.png"
ok "grids: 1400x1000 as set" test "$(png_size "$T/seed000_grids/2.4_vo_grid.png")" = "1400x1000"

# A notebook without its folder argument fails with its usage line, not a Lua traceback only.
out=$("$ATTNLAB" "$ATTNLAB_SRC/scripts/seed000_grids.lua" </dev/null 2>&1)
ok "no folder: fails" test $? -ne 0
ok "no folder: prints the usage" has "$out" "usage: attnlab scripts/seed000_grids.lua OUTDIR"

cli_done
