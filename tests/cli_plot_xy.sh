#!/bin/bash
# cli_plot_xy.sh -- plot what you computed (issue 31, section 1), read back from the SVGs (PLplot's
# svg driver keeps every label as text): `plot xy` from a CSV and from Lua tables (series, names,
# error bars, log axes, ranges, markers), `plot matrix`, the errors of a bad column / an empty CSV /
# rows or series of mismatched lengths, the overrides every built-in figure takes (title, logy,
# xrange, ...; refused by name where a figure cannot draw them), `replot` with changes, and
# `plot panels` (several figures in one file). stdin is /dev/null throughout.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-plot-xy shared-cache
cd "$T" || exit 1
unset DISPLAY
export TMPDIR=$T/tmpdir      # the CSV files of Lua tables go here (checked to be removed at exit)
mkdir -p "$TMPDIR"
# svg_labels FILE: the text of every <tspan> in FILE, one a line, character references decoded.
svg_labels() {
    perl -CS -ne 'while (/<tspan[^>]*>([^<]*)/g) { my $t = $1; $t =~ s/&#x([0-9a-fA-F]+);/chr(hex $1)/ge; print "$t\n"; }' "$1"
}
has_label() { svg_labels "$1" | grep -qxF -- "$2"; }
# joined FILE: the labels joined by '|' (a superscript is its own tspan: 10^2 reads "|10|2|")
joined() { echo "|$(svg_labels "$1" | tr '\n' '|')"; }

cat >r.csv <<'EOF'
# per-layer ranks, computed elsewhere
layer,max,median,sd
0,10,5,1
1,100,50,10
2,1000,500,100
3,10000,,1000
4,100000,50000,10000
EOF

# ---- plot xy from a CSV: title, axis labels, legend names from the header, log y labelled 10^k
out=$(e "plot xy data r.csv x layer y max,median yerr sd logy title 'Ranks by depth' xlabel 'the layer' ylabel 'the rank' to $T/xy.svg; plot xy data r.csv x 1 y 2 style points marker square to $T/xy.png")
has "$out" "wrote $T/xy.svg" && has "$out" "wrote $T/xy.png" || fail "plot xy from a CSV: [$out]"
is_svg xy.svg && is_png xy.png || fail "plot xy wrote no SVG / PNG"
for l in "Ranks by depth" "the layer" "the rank" "max" "median"; do
    has_label xy.svg "$l" || fail "xy.svg lacks the label '$l': [$(joined xy.svg)]"
done
has "$(joined xy.svg)" "|10|2|" && has "$(joined xy.svg)" "|10|5|" || fail "log y labels 10^2 .. 10^5: [$(joined xy.svg)]"
has_label xy.svg "sd" && fail "the yerr column sd is drawn as a series"
# no y given: every column but x (the first) is a series, named by the header
e "plot xy data r.csv to $T/all.svg" >/dev/null
has_label all.svg "sd" && has_label all.svg "max, median, sd against layer" || fail "default series: [$(joined all.svg)]"
# quoted cells (RFC 4180): a header name with a comma and a quote
printf 'n,"mean, over ""heads"""\n1,2\n2,3\n' >q.csv
e "plot xy data q.csv to $T/q.svg" >/dev/null
has_label q.svg 'mean, over "heads"' || fail "a quoted header name: [$(joined q.svg)]"
# style auto: markers on short series, lines only past 200 points (100k markers took 12 s)
{ echo "t,v"; for i in $(seq 1 300); do echo "$i,$((i % 17))"; done; } >long.csv
e "plot xy data long.csv to $T/long.svg; plot xy data long.csv style both to $T/longb.svg" >/dev/null
[ "$(svg_labels long.svg | grep -c '●')" = 0 ] || fail "style auto marks a 300-point series"
[ "$(svg_labels longb.svg | grep -c '●')" -ge 300 ] || fail "style both marks every point"
[ "$(svg_labels xy.svg | grep -c '●')" -ge 5 ] || fail "style auto marks a 5-point series"
# dashes cycle by default (PLplot's SVG draws a dashed line as many short polylines): all solid has fewer
e "plot xy data r.csv to $T/dcyc.svg; plot xy data r.csv dash 1 to $T/dsolid.svg" >/dev/null
[ "$(grep -c '<polyline' dcyc.svg)" -gt "$(grep -c '<polyline' dsolid.svg)" ] || fail "dashes do not cycle by default"
# logx and xrange: the x axis is labelled at powers of ten; a range narrows it
printf 'n,err\n1,0.5\n10,0.1\n100,0.02\n1000,0.004\n' >p.csv
e "plot xy data p.csv logx logy xrange 1:1000 legend 'power law' to $T/ll.svg" >/dev/null
has "$(joined ll.svg)" "|10|3|" && has_label ll.svg "power law" || fail "logx axis / legend override: [$(joined ll.svg)]"
has "$(joined ll.svg)" "|10|4|" && fail "xrange 1:1000 still shows 10^4"

# ---- clear errors: a bad column, an empty CSV, rows of different lengths, a log axis of negatives
out=$(e "plot xy data r.csv y nope to $T/bad.svg")
has "$out" "no column 'nope' in r.csv (4 columns: layer, max, median, sd" || fail "bad column: [$out]"
: >empty.csv
out=$(e "plot xy data empty.csv to $T/bad.svg")
has "$out" "empty.csv has no data rows (the file is empty)" || fail "empty CSV: [$out]"
printf 'a,b\n' >hdr.csv
out=$(e "plot xy data hdr.csv to $T/bad.svg")
has "$out" "hdr.csv has no data rows (only a header)" || fail "header-only CSV: [$out]"
printf 'a,b\n1,2\n3\n' >short.csv
out=$(e "plot xy data short.csv to $T/bad.svg")
has "$out" "short.csv line 3 has 1 cell, the header has 2" || fail "ragged CSV: [$out]"
out=$(e "plot xy data r.csv x layer,max y max,median,sd to $T/bad.svg")
has "$out" "2 x columns for 3 y columns" || fail "x / y count mismatch: [$out]"
out=$(e "plot xy data r.csv xrange 5:1 to $T/bad.svg")
has "$out" "xrange '5:1': the upper bound must exceed the lower one" || fail "empty range: [$out]"
out=$(e "plot xy data r.csv marker star to $T/bad.svg")
has "$out" "marker 'star'" || fail "bad marker: [$out]"
[ -e bad.svg ] && fail "a refused figure left bad.svg"

# ---- plot matrix: a CSV grid as a heatmap
printf '1,-2,3\n-4,5,-6\n' >m.csv
out=$(e "plot matrix data m.csv title 'Grid' to $T/m.svg")
has "$out" "wrote $T/m.svg" && has_label m.svg "Grid" || fail "plot matrix: [$out]"
out=$(e "plot matrix data m.csv xrange 1:3 yrange 0:1 to $T/mc.svg; plot xy data r.csv to $T/xy.pdf")
has_label mc.svg "rows 0-0, columns 1-2" || fail "plot matrix crop: [$out] [$(joined mc.svg)]"
is_pdf xy.pdf || fail "plot xy to a PDF: [$out]"

# ---- every built-in figure takes the overrides: title, logy, xrange on a spectrum
out=$(e "load demo-r1; plot spectrum vo layer 1 head 0 title 'Spectrum X' logy xrange 0:10 xlabel 'index' to $T/sp.svg")
has "$out" "wrote $T/sp.svg" || fail "spectrum with overrides: [$out]"
has_label sp.svg "Spectrum X" && has_label sp.svg "index" || fail "spectrum title / xlabel override: [$(joined sp.svg)]"
has "$(joined sp.svg)" "|10|" || fail "spectrum logy override draws no log axis: [$(joined sp.svg)]"
has_label sp.svg "20" && fail "xrange 0:10 still labels index 20"
out=$(e "load demo-r1; plot vo-ranks layer 1 title 'Ranks Y' to $T/vr.svg; plot vo-ranks layer 1 logx to $T/vr2.svg")
has_label vr.svg "Ranks Y" || fail "rank figure title override"
has "$out" "plot ranks: \`logx\` is not available for this figure (it takes title, xlabel, ylabel, size, yrange)" || fail "an override a figure cannot draw is refused: [$out]"
# plot esd (log-log): title and xrange (data units) over its own axes
out=$(e "load demo-r1; plot esd v layer 0 head 0 to $T/esd0.svg; plot esd v layer 0 head 0 title 'ESD T' xrange 0.01:100 to $T/esd.svg")
has_label esd.svg "ESD T" && has "$(joined esd.svg)" "|10|-1|10|0|10|1|10|2|" || fail "plot esd overrides: [$out] [$(joined esd.svg)]"
has "$(joined esd0.svg)" "|10|-1|" && fail "esd0 already spans 0.1 (the xrange check proves nothing)"
# figures that place their own labels (the rank grid, key norms) take the label overrides too
out=$(e "load demo-llama; plot vo-ranks all xlabel 'heads HX' ylabel 'rank RY' yrange 0:20 to $T/g.svg; plot key-norms xrange 0:40 xlabel 'pair PX' ylabel 'norm' to $T/kn.svg")
has_label g.svg "heads HX" && has_label g.svg "rank RY" || fail "rank grid label overrides: [$out] [$(joined g.svg)]"
# key norms: the y label once, over both panels (each panel says real / imaginary on its right)
has_label kn.svg "pair PX" && has_label kn.svg "norm" && has_label kn.svg "real" && has_label kn.svg "imaginary" || fail "key-norms label overrides: [$out]"
has_label kn.svg "40" || fail "key-norms xrange 0:40 reaches 40: [$(joined kn.svg)]"
out=$(e "load demo-r1; plot spectrum vo layer 1 head 0 size 640x480 to $T/small.png")
[ "$(png_size small.png)" = 640x480 ] || fail "size 640x480 gave $(png_size small.png)"

# ---- replot: the last figure with changes (title replaced, flag removed, new file)
out=$(e "plot xy data r.csv x layer y max logy title 'First' to $T/r1.svg; replot title 'Second' to $T/r2.svg; replot nology to $T/r3.svg")
has_label r1.svg "First" && has_label r2.svg "Second" || fail "replot changes the title: [$out]"
has_label r2.svg "First" && fail "replot kept the old title"
has "$(joined r2.svg)" "|10|3|" || fail "replot keeps logy"
has "$(joined r3.svg)" "|10|3|" && fail "replot nology still logs"
has_label r3.svg "Second" || fail "the replotted command is the last figure"
out=$(e "replot title x")
has "$out" "replot: no figure yet" || fail "replot without a figure: [$out]"
out=$(e "plot xy data r.csv to $T/r4.svg; replot colour red")
has "$out" "'colour' is not a keyword of xy" || fail "replot with a bad keyword: [$out]"

# ---- panels: four figures, one file, four titles
out=$(e "load demo-r1; plot panels 2x2 figures \"plot xy data r.csv y max title 'Panel A'; plot xy data r.csv logy title 'Panel B'; plot spectrum vo layer 1 head 0 title 'Panel C'; plot energy vo layer 1 head 0 title 'Panel D'\" to $T/pan.svg; plot panels 2x1 figures \"plot xy data r.csv; plot xy data r.csv\" to $T/pan.png")
has "$out" "wrote $T/pan.svg" && has "$out" "wrote $T/pan.png" || fail "plot panels: [$out]"
for l in "Panel A" "Panel B" "Panel C" "Panel D"; do has_label pan.svg "$l" || fail "pan.svg lacks '$l'"; done
[ "$(grep -c '<svg' pan.svg)" = 1 ] || fail "panels wrote more than one page"
out=$(e "plot panels 1x1 figures \"plot xy data r.csv; plot xy data r.csv\" to $T/pbad.svg")
has "$out" "more than 1 figure\b" || fail "too many panels: [$out]"
out=$(e "plot panels 2x1 figures \"plot xy data nope.csv\" to $T/pbad.svg")
has "$out" "plot panels, figure 1 (plot xy): .*nope.csv" || fail "a failing panel names itself and why: [$out]"
[ -e pbad.svg ] && fail "a failed panel figure left its file"

# ---- from Lua: series tables to a PNG and an SVG (names, markers, error bars), a matrix, panels
cat >nb.lua <<'EOF'
local out = arg[1]
local x, y1, y2, e = {}, {}, {}, {}
for i = 1, 6 do x[i] = i; y1[i] = 10 ^ i; y2[i] = 2 * i; e[i] = 0.5 end
attn.plot("xy", {series = {{x = x, y = y1, name = "ten to the i, \"quoted\"", marker = "square"},
                           {x = x, y = y2, yerr = e, name = "two i", dash = 2}},
                 logy = true, title = "From Lua", xlabel = "i", to = out .. "/lua.svg"})
attn.plot("xy", {series = {{y = y2, name = "default x"}}, style = "points", to = out .. "/lua.png"})
attn.run("replot title 'Lua replot' to " .. out .. "/lua2.svg")
attn.replot("logy title 'attn.replot' to " .. out .. "/lua3.svg")
attn.plot("matrix", {data = {{1, -1, 2}, {0, 3, -2}}, title = "Lua grid", to = out .. "/lgrid.svg"})
attn.plot("panels", "1x2", {figures = {"plot matrix data m.csv title 'Top'", "plot xy data r.csv title 'Bottom'"},
                             to = out .. "/lpan.svg"})
local ok, err = pcall(attn.plot, "xy", {series = {{x = {1, 2, 3}, y = {1, 2}}}, to = out .. "/lbad.svg"})
print("mismatch:", err)
ok, err = pcall(attn.plot, "xy", {series = {{x = {1, 2}, y = {1, "two"}}}, to = out .. "/lbad.svg"})
print("text:", err)
ok, err = pcall(attn.plot, "matrix", {data = {{1, 2}, {3}}, to = out .. "/lbad.svg"})
print("ragged:", err)
EOF
out=$("$B" nb.lua "$T" </dev/null 2>&1)
has "$out" "wrote $T/lua.svg" && has "$out" "wrote $T/lua.png" && is_png lua.png || fail "Lua plot xy: [$out]"
for l in "From Lua" 'ten to the i, "quoted"' "two i" "i"; do has_label lua.svg "$l" || fail "lua.svg lacks '$l': [$(joined lua.svg)]"; done
has "$(joined lua.svg)" "|10|6|" || fail "Lua logy axis reaches 10^6: [$(joined lua.svg)]"
has_label lua2.svg "Lua replot" && has_label lua2.svg "default x" || fail "replot of a Lua figure (its table re-read): [$out]"
has_label lua3.svg "attn.replot" && has_label lua3.svg "default x" || fail "attn.replot: [$out]"
has_label lgrid.svg "Lua grid" || fail "Lua matrix: [$out]"
has_label lpan.svg "Top" && has_label lpan.svg "Bottom" || fail "Lua panels: [$out]"
has "$out" "mismatch:.*series\[1\]: x has 3 values, y has 2; they must have one length" || fail "Lua length mismatch: [$out]"
has "$out" "text:.*series\[1\].y\[2\] is a string, not a number" || fail "Lua text value: [$out]"
has "$out" "ragged:.*data\[2\] has 1 value, row 1 has 2" || fail "Lua ragged matrix: [$out]"
[ -e lbad.svg ] && fail "a refused Lua figure left lbad.svg"
ls "$TMPDIR"/attnlab-lua-*.csv 2>/dev/null | grep -q . && fail "Lua's temporary CSV files were left behind"

# ---- the example notebook: a per-layer statistic of attn.ranks rows drawn with attn.plot("xy")
ex=$ATTNLAB_SRC/examples/plot_xy.lua
out=$("$B" "$ex" "$T/nb" </dev/null 2>&1)
for f in vo_rank_by_layer.png vo_rank_by_layer_log.svg low_heads.png panels.png; do
    has "$out" "wrote $T/nb/$f" && [ -s "nb/$f" ] || fail "examples/plot_xy.lua did not write $f: [$out]"
done
has_label nb/vo_rank_by_layer_log.svg "mean over heads (± sd)" || fail "notebook legend: [$(joined nb/vo_rank_by_layer_log.svg)]"

cli_done
