#!/usr/bin/env bash
# cli_plot_new_user.sh -- what a new user met in the plot commands (plu, s15): counts in the plot commands and
# the calibration print the singular for one (al_s: "1 layer", "1 budget", "1 cell", "1 token"); a linear y axis
# labels its values without PLplot's "(x10^k)" corner; plot esd says when its power-law fit means nothing;
# set plot.dir applies the folder rule of every command that writes when it is set.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-plot-new-user shared-cache

run -e "synth demo-llama base"
ok "synth demo-llama" test "$(rc)" = 0
cp -r base one
python3 - one <<'PY'
import json, sys
c = json.load(open(f"{sys.argv[1]}/config.json")); c["num_hidden_layers"] = 1
json.dump(c, open(f"{sys.argv[1]}/config.json", "w"), indent=1)
PY
echo 5 >one_id.txt
cli_ids 2000 ids.txt

# the calibration (core/analysis/calib.c): a one-layer calibration on a four-layer model, a one-token text
out=$(e "load one; calibrate ids ids.txt samples 2 seqlen 64; calib save c1.safetensors; load base; calib load c1.safetensors")
ok "calib load: statistics of 1 layer [$(grep -o 'statistics ([^)]*)' <<<"$out")]" \
    has "$out" "the calibration statistics (1 layer, 8 heads, 2 KV heads"
out=$(e "load one; calibrate ids one_id.txt samples 1 seqlen 64")
ok "calibrate: the text has 1 token [$out]" has "$out" "the text has 1 token, fewer than one window"

# plot compare-budgets at one budget
out=$(e "load one; plot compare-budgets budgets 64 to cb.png")
ok "plot compare-budgets: at 1 budget [$(grep -o 'at [0-9]* budgets\?' <<<"$out")]" \
    has "$out" "mean out error over the layers at 1 budget (the model caches 128 values"
ok "  the figure was written" is_png cb.png

# plot xy's CSV errors
printf 'x,y\n1,2\n3\n' >ragged.csv
printf 'x,y,z\n1,2,3\n2,3,4\n' >three.csv
out=$(e "plot xy data ragged.csv to r.png")
ok "plot xy: a row of 1 cell [$out]" has "$out" "line 3 has 1 cell, the header has 2"
out=$(e "plot xy data three.csv legend a to l.png")
ok "plot xy legend: 1 name for 2 series [$out]" has "$out" "plot xy legend: 1 name for 2 series"
out=$(e "plot xy data three.csv x x,y y z to x.png")
ok "plot xy: 2 x columns for 1 y column [$out]" has "$out" "2 x columns for 1 y column;"

# kvsvd-unbalance's errors (about 0.25): the y labels are the values, no "(x10-1)" in a corner
run -e "load demo-llama; calibrate ids ids.txt samples 8 seqlen 128; plot kvsvd-unbalance to ku.svg"
ok "plot kvsvd-unbalance wrote ku.svg" is_svg ku.svg
texts=$(svg_texts ku.svg 2>/dev/null)
ok "kvsvd-unbalance: no (x10^k) multiplier [$(grep -o '(x10[^)]*)' <<<"$texts")]" hasnt "$texts" "(x10"
ok "  its y labels read as the values, 0.2... [$(grep -c '^0\.2[0-9]*$' <<<"$texts")]" has "$texts" "^0\.2[0-9]*$"

# plot esd: a tail of 6 eigenvalues is no fit (WeightWatcher's 10); alpha outside 2-6 is said so
out=$(e "load demo-llama; plot esd o layer 0 head 0 to esd.svg")
ok "plot esd: no meaningful fit on 6 eigenvalues [$out]" \
    has "$out" "no meaningful power-law fit (alpha 1[0-9.]* on a tail of [0-9] eigenvalues, under 10)"
ok "  and no power-law line in its legend" hasnt "$(svg_texts esd.svg)" "power law"
out=$(e "load demo-r1; plot esd q layer 0 head 0 to esd_q.png")
ok "plot esd: alpha 6.11 is outside WeightWatcher's 2-6 [$out]" has "$out" "alpha 6\.[0-9]* (tail of 1[0-9] .*) outside WeightWatcher's 2-6"

# set plot.dir: a missing folder outside the working directory is refused when it is set
out=$(e "set plot.dir /nonexistent-plu-$$/figs; load demo-llama; plot spectrum vo layer 0 head 0")
ok "set plot.dir /missing/...: refused at the set [$out]" has "$out" "^error: set plot.dir: folder /nonexistent-plu-$$ does not exist"
ok "  it names mkdir -p" has "$out" "mkdir -p /nonexistent-plu-$$/figs"
ok "  and nothing ran after it" hasnt "$out" "^loaded"
out=$(e "set plot.dir figs/sub; load demo-llama; plot spectrum vo layer 0 head 0")
ok "set plot.dir figs/sub (inside the working directory) is accepted [$out]" has "$out" "wrote figs/sub/"
echo 5 > one.txt
out=$(e "load demo-llama; plot attention ids one.txt layer 0 head 0")
ok "plot attention: a file of 1 id [$out]" has "$out" "one.txt holds 1 id; at least 2"
cli_done
