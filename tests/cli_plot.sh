#!/bin/bash
# cli_plot.sh -- the `plot` command end to end on demo-r1: every sub-command writes PNG / SVG /
# PDF where `to` says (folders made, plot.format for a name without extension, plot.size
# respected), figures land in plot.dir with their path printed when there is no `to`, Lua gets
# the path back, the energy plot reports the planted ranks it draws, and errors (bad extension,
# unwritable path, missing head, no display, full-RoPE QK) exit 1 with a message and never a
# PLplot prompt or console noise. stdin is /dev/null throughout.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-plot
unset DISPLAY
run() { "$ATTNLAB" -e "$1" </dev/null 2>&1; }
all=""

# ---- every sub-command, every format, sizes, folders made
out=$(run "load demo-r1; set plot.size 800x600; plot vo-ranks layer 3 to $T/new/dir/vo3.png; plot qk-ranks all to $T/qk.svg; plot energy qk layer 2 head 0 to $T/e.pdf; plot spectrum vo layer 2 head 0 log to $T/s; plot heatmap q layer 2 head 0 factor scaled to $T/h.png; plot heatmap vo layer 1 head 0 to $T/hvo.png; plot ranks-by-layer vo to $T/bl.png; plot vo-ranks layers 1-3 to $T/grid.pdf")
rc=$?
all+=$out
ok "plot commands exit 0" test $rc -eq 0
ok "vo-ranks PNG in a folder made on demand" is_png "$T/new/dir/vo3.png"
ok "plot.size 800x600 respected" test "$(png_size "$T/new/dir/vo3.png")" = "800x600"
ok "qk-ranks grid SVG" is_svg "$T/qk.svg"
ok "energy PDF" is_pdf "$T/e.pdf"
ok "no extension: plot.format png" is_png "$T/s.png"
ok "heatmap factor PNG" is_png "$T/h.png"
ok "fused heatmap PNG" is_png "$T/hvo.png"
ok "ranks-by-layer PNG" is_png "$T/bl.png"
ok "grid PDF" is_pdf "$T/grid.pdf"
ok "each file's path is printed" has "$out" "wrote $T/new/dir/vo3.png"
# demo-r1 layer 2 QK is "fused-low" r=4: the energy plot reports (and marks) rank 4 at both tau.
ok "energy reports the planted fused rank (0.999)" has "$out" "effective rank at tau = 0.999: 4 of 32"
ok "energy reports the planted fused rank (0.99)" has "$out" "effective rank at tau = 0.99: 4 of 32"

# ---- no `to`: a file in plot.dir named after the figure; plot.format svg
out=$(run "load demo-r1; set plot.dir $T/figs; plot vo-ranks layer 1; set plot.format svg; plot spectrum v layer 1 head 0")
rc=$?
all+=$out
ok "auto-named plots exit 0" test $rc -eq 0
ok "auto-named PNG in plot.dir" is_png "$T/figs/demo-r1-vo-ranks-L1.png"
ok "its path is printed" has "$out" "wrote $T/figs/demo-r1-vo-ranks-L1.png"
ok "plot.format svg used" is_svg "$T/figs/demo-r1-spectrum-v-L1-H0.svg"
ok "default size 1200x800" test "$(png_size "$T/figs/demo-r1-vo-ranks-L1.png")" = "1200x800"

# ---- Lua: attn.plot returns the path
out=$(run "load demo-r1; lua local p = attn.plot('vo-ranks', {layer = 2, to = '$T/lua.png'}); print('PATH ' .. p)")
all+=$out
ok "Lua attn.plot returns the path" has "$out" "PATH $T/lua.png"
ok "Lua figure written" is_png "$T/lua.png"

# ---- errors: exit 1, a message, no prompt, nothing written
out=$(run "load demo-r1; plot vo-ranks layer 2 to $T/x.jpg")
ok "bad extension fails" test $? -eq 1
ok "bad extension is named" has "$out" "unknown extension"
echo x >"$T/afile"
out=$(run "load demo-r1; plot vo-ranks layer 2 to $T/afile/x.png")
ok "unwritable path fails" test $? -eq 1
ok "unwritable path says why" has "$out" "is not a folder"
ok "nothing written there" test ! -e "$T/afile/x.png"
out=$(run "load demo-r1; plot spectrum q layer 2")
ok "missing head fails" test $? -eq 1
ok "missing head says so" has "$out" "needs a layer and a head"
out=$(run "load demo-r1; plot vo-ranks layer 2 window")
ok "window without a display fails" test $? -eq 1
ok "window without a display says so" has "$out" "no display"
out=$(DISPLAY=:9999 "$ATTNLAB" -e "load demo-r1; plot vo-ranks layer 2 window" </dev/null 2>&1)
ok "window on a dead display fails (no exit inside PLplot)" test $? -eq 1
ok "window on a dead display says so" has "$out" "cannot open the X display"
all+=$out
out=$(run "load demo-r1; plot vo-ranks layer 9 to $T/l9.png")
ok "layer out of range fails" test $? -eq 1
ok "layer out of range says the range" has "$out" "0-5"
out=$(run "load demo-llama; plot qk-ranks layer 1 to $T/qk_llama.png")
ok "QK on a full-RoPE model fails" test $? -eq 1
ok "QK on a full-RoPE model: no figure" test ! -e "$T/qk_llama.png"
out=$(run "plot vo-ranks layer 1 to $T/nomodel.png")
ok "no model: fails" test $? -eq 1
ok "no model: says load one" has "$out" "load"
all+=$out

# ---- help
out=$(run "help plot")
ok "help plot lists sub-commands" has "$out" "ranks-by-layer"
out=$(run "help plot heatmap")
ok "help plot heatmap explains factors" has "$out" "scaled"

# ---- never PLplot's own prompts or messages
ok "no PLplot console output" hasnt "$all" "PLPLOT"
ok "no PLplot prompt" hasnt "$all" "Enter device"
ok "no temporary files left" test -z "$(find "$T" -name '*.tmp')"

cli_done
