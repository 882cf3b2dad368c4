#!/usr/bin/env bash
# cli_plot_compare.sh -- `plot compare` and `plot compare-budgets` through `attnlab -e`, headless
# (no DISPLAY, stdin /dev/null): PNG / SVG / PDF written where `to` says (PNG size from the IHDR
# chunk, plot.size respected), the auto-named file in plot.dir, the path returned to Lua; the data
# is the session's last `compare` when it matches (the plotted means equal compare's own summary),
# else the comparison runs and is kept (another budget, uncovered layers, a new calibration, a
# closed model); methods that cannot meet the budget are left out with the reason (TransMLA on
# GPT-2); exact errors (FaRR's scores under RoPE) are noted; bad budgets are errors.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-plot-compare shared-cache
cd "$T" || exit 1
unset DISPLAY
# run CMDS: `attnlab -e CMDS` with no input (the shared run takes attnlab's arguments)
run() { "$B" -e "$1" </dev/null >out.txt 2>err.txt; echo $? >rc.txt; }
# mean METHOD: the mean output error `compare` printed for METHOD in its summary line.
compare_mean() { grep "^mean output error over the layers:" out.txt | grep -o " $1 [^;]*" | awk '{ print $2 }'; }
# plot_mean METHOD: the mean error `plot compare` printed for METHOD.
plot_mean() { grep -E "^  $1 +[0-9]+ values" out.txt | sed 's/.*: mean [a-z]* error //' | awk '{ print $1 }'; }

# ---- demo-llama (4 layers, 2 KV heads of 32: 128 values per token per layer): all three formats
run "load demo-llama; compare kv-budget 96 tokens 32; set plot.size 900x600; plot compare to $T/a.png; plot compare what score to $T/figs/b.svg; plot compare kv-budget 64 layers 1-2 to $T/c.pdf"
[ "$(rc)" = 0 ] || fail "llama plots: rc $(rc) [$(cat err.txt)]"
is_png a.png || fail "a.png is not a PNG"
[ "$(png_size a.png)" = 900x600 ] || fail "a.png is $(png_size a.png), not the plot.size 900x600"
is_svg figs/b.svg || fail "figs/b.svg (folder made on demand) is not an SVG"
is_pdf c.pdf || fail "c.pdf is not a PDF"
grep -q "^wrote $T/a.png$" out.txt && grep -q "^wrote $T/figs/b.svg$" out.txt && grep -q "^wrote $T/c.pdf$" out.txt \
    || fail "paths printed: [$(grep wrote out.txt)]"
[ "$(grep -c "demo-llama at a KV budget of 96 of 128 values per token per layer (75.0%), layers 0-3: the session's last compare; 32 random" out.txt)" = 2 ] \
    || fail "both budget-96 plots reuse the compare: [$(grep 'KV budget' out.txt)]"
grep -q "demo-llama at a KV budget of 64 of 128 values .*, layers 1-2: compared now (kept for the next plot)" out.txt \
    || fail "another budget runs the comparison: [$(grep 'KV budget' out.txt)]"
# the figure shows the very numbers compare printed (first plot: out errors, 4 layers)
for meth in farr transmla kqsvd tpa-a tpa-b mean-pool; do
    c=$(compare_mean "$meth"); p=$(plot_mean "$meth" | head -1)
    [ -n "$c" ] && [ "$c" = "$p" ] || fail "$meth: compare's mean $c, the plot's $p"
done
grep -Eq "^  farr +96 values, r_v 16 \(keys whole under RoPE\): mean score error 0; exactly 0 in 4 layers \(not drawn on a log axis\)" out.txt \
    || fail "FaRR's exact scores noted: [$(grep '^  farr' out.txt)]"
grep -Eq "^  mean-pool +64 values, 1 KV head \(of 2\)" out.txt || fail "mean-pool caches 64: [$(grep mean-pool out.txt)]"
# budget 64: FaRR must keep the RoPE keys whole (64 values) and has none left for values
grep -q "^  farr      left out of the figure: keys under RoPE stay whole (64 values)" out.txt \
    || fail "FaRR left out at 64: [$(grep '^  farr' out.txt)]"
[ "$(grep -c 'left out of the figure' out.txt)" = 1 ] || fail "only FaRR is left out at 64: [$(cat out.txt)]"

# ---- the kept result: layers it covers reuse it, others rerun; closing the model drops it
run "load demo-llama; compare kv-budget 96 layers 1-2; plot compare layers 2 to one.png; plot compare layers 0-3 to all.png"
[ "$(rc)" = 0 ] || fail "layer subsets: rc $(rc) [$(cat err.txt)]"
grep -q ", layer 2: the session's last compare" out.txt || fail "covered layer reuses: [$(grep 'KV budget' out.txt)]"
grep -q ", layers 0-3: compared now" out.txt || fail "uncovered layers rerun: [$(grep 'KV budget' out.txt)]"
is_png one.png && is_png all.png || fail "layer subset PNGs"
run "load demo-llama; compare kv-budget 96 layers 0; close demo-llama; load demo-llama; plot compare to d.png"
[ "$(rc)" = 0 ] && grep -q "no kv-budget given and no compare in the session: B = 64, half of the 128 values demo-llama caches" out.txt \
    || fail "close drops the kept compare / default budget: rc $(rc) [$(cat out.txt)] [$(cat err.txt)]"
grep -q "tokens 64\|; 64 random Gaussian" out.txt || fail "default tokens 64"

# ---- demo-gpt2 (no RoPE: TransMLA cannot run), auto-named file in plot.dir, Lua gets the path
run "load demo-gpt2; set plot.dir $T/auto; plot compare kv-budget 96 tokens 16; lua print('lua:' .. attn.plot('compare', {to = '$T/g.svg'}))"
[ "$(rc)" = 0 ] || fail "gpt2 plot: rc $(rc) [$(cat err.txt)]"
is_png auto/demo-gpt2-compare-B96-out.png || fail "auto-named PNG: [$(ls -R auto 2>&1)]"
[ "$(png_size auto/demo-gpt2-compare-B96-out.png)" = 1200x800 ] || fail "default size: $(png_size auto/demo-gpt2-compare-B96-out.png)"
grep -q "^  transmla  left out of the figure: RoRoPE needs rotary keys (the model has no RoPE)" out.txt \
    || fail "TransMLA left out on GPT-2: [$(cat out.txt)]"
grep -Eq "^  farr +96 values, r_k 6, r_v 6: mean out error" out.txt || fail "FaRR truncates K too without RoPE"
grep -q "^lua:$T/g.svg$" out.txt && is_svg g.svg || fail "Lua path: [$(cat out.txt)] [$(cat err.txt)]"
grep -q ": the session's last compare; 16 random" out.txt || fail "the Lua plot reuses the kept compare"

# ---- the trade-off figure: mean error against what each method caches
run "load demo-gpt2; plot compare-budgets budgets 128,32,64,64 layers 0-1 tokens 16 to $T/tb.png; plot compare-budgets budgets 96 what score linear to $T/tb.pdf"
[ "$(rc)" = 0 ] || fail "compare-budgets: rc $(rc) [$(cat err.txt)]"
is_png tb.png && [ "$(png_size tb.png)" = 1200x800 ] || fail "tb.png: $(png_size tb.png)"
is_pdf tb.pdf || fail "tb.pdf"
grep -q "demo-gpt2, layers 0-1: mean out error over the layers at 3 budgets (the model caches 512" out.txt \
    || fail "budgets sorted without repeats: [$(cat out.txt)]"
[ "$(grep -Ec '^ +(32|64|128) ' out.txt)" = 3 ] || fail "one row per budget: [$(cat out.txt)]"
grep -Eq '^ +32 +[0-9.]+ +- ' out.txt || fail "no TransMLA at 32: [$(grep -E '^ +32 ' out.txt)]"
grep -q "transmla: left out of the figure, it meets none of these budgets in every layer (RoRoPE needs rotary keys" out.txt \
    || fail "compare-budgets leaves TransMLA out"

# ---- bad budgets
run "load demo-llama; plot compare kv-budget 0"
[ "$(rc)" = 1 ] && grep -q "kv-budget 0 is out of range" err.txt || fail "kv-budget 0: rc $(rc) [$(cat err.txt)]"
run "load demo-llama; plot compare kv-budget -5"
[ "$(rc)" = 1 ] && grep -q "out of range" err.txt || fail "kv-budget -5: rc $(rc) [$(cat err.txt)]"
run "load demo-llama; plot compare kv-budget 1 to $T/none.png"
[ "$(rc)" = 1 ] && grep -q "plot compare: no method meets kv-budget 1 on demo-llama (it caches 128 values per token per layer): farr keys under RoPE" err.txt \
    || fail "kv-budget 1: rc $(rc) [$(cat err.txt)]"
[ ! -e none.png ] || fail "a figure was written for an impossible budget"
run "load demo-llama; plot compare kv-budget many"
[ "$(rc)" = 1 ] || fail "kv-budget many: rc $(rc)"
run "load demo-gpt2; plot compare-budgets budgets 8,x"
[ "$(rc)" = 1 ] && grep -q "budgets '8,x' must be whole numbers" err.txt || fail "budgets 8,x: [$(cat err.txt)]"
run "load demo-gpt2; plot compare-budgets budgets 1,2 layers 0"
[ "$(rc)" = 1 ] && grep -q "no method meets any of the budgets on demo-gpt2" err.txt || fail "budgets 1,2: [$(cat err.txt)]"
run "load demo-r1; plot compare kv-budget 64"
[ "$(rc)" = 1 ] && grep -q "is MLA" err.txt || fail "MLA refused: [$(cat err.txt)]"
run "load demo-llama; plot compare kv-budget 96 to $T/x.bmp"
[ "$(rc)" = 1 ] && [ -s err.txt ] && [ ! -e x.bmp ] || fail "bad extension: rc $(rc) [$(cat err.txt)]"

# ---- a new calibration is not the kept one's (needs a tokenizer: stories260K)
M="${ATTNLAB_MODELS:-}/stories260K-hf"
if [ -d "$M" ]; then
    awk 'BEGIN { srand(5); split("once upon a time there was a little girl named lily she liked to play with her ball", w);
                 for (i = 0; i < 1200; i++) printf "%s ", w[int(rand() * 18) + 1] }' > story.txt
    run "load $M as s; compare kv-budget 32 layers 0-1 tokens 16; calibrate story.txt samples 2 seqlen 64 inputs on; plot compare to cal.png; plot compare fit weights to w.png"
    [ "$(rc)" = 0 ] || fail "calibrated: rc $(rc) [$(cat err.txt)]"
    grep -q "s at a KV budget of 32 of 64 values .*, layers 0-1: compared now .*16 random Gaussian tokens, seed 20250607 (with the calibration's second moment)" out.txt \
        || fail "calibration reruns: [$(grep 'KV budget' out.txt)]"
    grep -q "s at a KV budget of 32 of 64 values .*, layers 0-1: compared now .*16 random Gaussian tokens, seed 20250607 (unit variance)" out.txt \
        || fail "fit weights reruns: [$(grep 'KV budget' out.txt)]"
    is_png cal.png && is_png w.png || fail "calibrated PNGs"
fi

cli_done
