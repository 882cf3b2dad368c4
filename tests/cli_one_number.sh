#!/usr/bin/env bash
# cli_one_number.sh -- issue 25, section 6 ("One setting, one number"), through `attnlab -e`:
#   1. `compare` / `plot compare-budgets` refit KQ-SVD at every budget: after `kvsvd learn kqsvd
#      rank 4` the sweep's kqsvd column falls with the budget and is the sweep without `kvsvd
#      learn`, number for number; the one budget whose ranks are kvsvd learn's reuses its
#      projections and says "reused"
#   2. one FreqFold default (core's TMLA_DEFAULT_FREQFOLD): `convert mla`'s layer-0 alpha is `plot
#      kv-balance`'s on demo-kvnorm (7.76 vs 6.85 before), both say the default; `convert mla-table`
#      says its alpha / energies are means over layers, in the headline and the column names
#   3. `compare` on windowed models (gemma2: windows on even layers and soft-caps; mixtral: window 8
#      in every layer) runs, and every method but TransMLA (2 KV heads) is exact at the full cache
#   4. one error notation: `kvsvd learn` and `kvsvd eval` share rank_k, rank_v and <what>_err; the
#      figures' error axes read `<what>_err = ||Y - Y'|| / ||Y||`, the README's
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K-hf
cli_setup /tmp/attnlab-cli-one-number shared-cache
cd "$T" || exit 1
unset DISPLAY
HF="$M/stories260K-hf"
cp "$ATTNLAB_SRC/examples/tinystory.txt" story.txt
# run CMDS: `attnlab -e CMDS` with no input
run() { "$B" -e "$1" </dev/null >out.txt 2>err.txt; echo $? >rc.txt; }
# col FILE N: column N of the budget rows (CSV) of plot compare-budgets' table in FILE
col() { awk -F, -v n="$2" '$1 ~ /^[0-9]+$/ && NF == 7 { print $n }' "$1"; }
# svg_text FILE: the text of an SVG's tspans, joined by " ~ "
svg_text() { python3 -c "import re, html, sys; print(' ~ '.join(html.unescape(x) for x in re.findall(r'<tspan[^>]*>([^<]*)', open(sys.argv[1]).read())))" "$1"; }

# ---- 1. KQ-SVD refit at every budget, like every other method
run "set format csv; load $HF; calibrate story.txt; plot compare-budgets budgets 32,40,48,56 to a.png"
[ "$(rc)" = 0 ] || fail "sweep without kvsvd learn: rc $(rc) [$(cat err.txt)]"
cp out.txt sweep0.txt
run "set format csv; load $HF; calibrate story.txt; kvsvd learn kqsvd rank 4; plot compare-budgets budgets 32,40,48,56 to b.svg"
[ "$(rc)" = 0 ] || fail "sweep after kvsvd learn: rc $(rc) [$(cat err.txt)]"
cp out.txt sweep1.txt
cp err.txt sweep1.err   # narration (the reused point's line) goes to stderr under format csv
k0=$(col sweep0.txt 4 | tr '\n' ' ')
k1=$(col sweep1.txt 4 | tr '\n' ' ')
[ "$(col sweep1.txt 4 | wc -l)" = 4 ] || fail "four budgets in the sweep: [$(cat sweep1.txt)]"
[ -n "$k0" ] && [ "$k0" = "$k1" ] || fail "kvsvd learn changes the sweep's KQ-SVD: without [$k0], with [$k1]"
awk '{ for (i = 2; i <= NF; i++) if (!($i < $(i - 1))) exit 1 }' <<<"$k1" \
    || fail "KQ-SVD's error must fall with the budget (old: 0.656 at 32-56): [$k1]"
[ "$(grep -c "^kqsvd at budget" sweep1.err)" = 1 ] && grep -q "^kqsvd at budget 32: \`kvsvd learn kqsvd\`'s projections, reused" sweep1.err \
    || fail "the one reused point (32) is said: [$(grep "^kqsvd" sweep1.err)]"
grep -q "^kqsvd at budget" sweep0.txt && fail "nothing reused without kvsvd learn"
has "$(svg_text b.svg)" "kqsvd (kvsvd learn's reused at 32)" || fail "the sweep's legend says reused: [$(svg_text b.svg)]"
# every other column is untouched by kvsvd learn as well
for c in 2 3 5 6 7; do
    [ "$(col sweep0.txt $c | tr '\n' ' ')" = "$(col sweep1.txt $c | tr '\n' ' ')" ] || fail "column $c moved with kvsvd learn"
done
run "load $HF; calibrate story.txt; kvsvd learn kqsvd rank 4; compare kv-budget 32 layers 0 to c32.csv; compare kv-budget 48 layers 0 to c48.csv; plot compare kv-budget 32 layers 0 to c32.svg"
[ "$(rc)" = 0 ] || fail "compare after kvsvd learn: rc $(rc) [$(cat err.txt)]"
grep -q '^0,kqsvd,32,"\?R_K 4, R_V 4 per KV head (reused: kvsvd learn'"'"'s, same ranks)' c32.csv \
    || fail "budget 32 = kvsvd learn's ranks: reused and labelled: [$(grep kqsvd c32.csv)]"
grep -q '^0,kqsvd,48,"\?R_K 6, R_V 6 per KV head (calibration, ' c48.csv \
    || fail "budget 48 refits at R 6 (old: kvsvd learn's R 4 at 32 values): [$(grep kqsvd c48.csv)]"
has "$(svg_text c32.svg)" "kqsvd: R_K 4, R_V 4 (reused)" || fail "the legend says reused: [$(svg_text c32.svg)]"
grep -q "^KQ-SVD's projections: those \`kvsvd learn kqsvd\` made, reused: their ranks are the budget's" out.txt \
    && grep -q "^KQ-SVD's projections: learned at the budget from the session's calibration" out.txt \
    || fail "compare's headline says where KQ-SVD came from: [$(grep "^KQ-SVD" out.txt)]"

# ---- 2. one FreqFold default, printed by the conversion and the figures
run "load demo-kvnorm; convert mla kv-rank full; plot kv-balance layer 0 to kvb.png; plot key-norms layer 0 to kn.png"
[ "$(rc)" = 0 ] || fail "demo-kvnorm: rc $(rc) [$(cat err.txt)]"
a_conv=$(awk '$1 == "0" && NF == 9 { print $2 }' out.txt)
a_fig=$(sed -n 's/^layer 0: alpha = \([0-9.e+-]*\) .*/\1/p' out.txt)
[ -n "$a_conv" ] && [ -n "$a_fig" ] && awk -v a="$a_conv" -v b="$a_fig" 'BEGIN { d = a - b; exit !(d < 1e-4 * a && -d < 1e-4 * a) }' \
    || fail "layer 0 shows one alpha: convert mla $a_conv, plot kv-balance $a_fig"
grep -q "RoPE dims 32 (freqfold 1), nope 32, v 32; freqfold: TransMLA's default, the TransMLA figures' too" out.txt \
    || fail "convert mla names the default: [$(grep converted out.txt)]"
[ "$(grep -c "^freqfold 1: TransMLA's default, the same as convert mla's" out.txt)" = 2 ] \
    || fail "both figures name the default: [$(cat out.txt)]"
grep -q "^layer 0: alpha = .*RoRoPE + FreqFold 1" out.txt || fail "kv-balance's alpha line names its FreqFold"
is_png kvb.png && is_png kn.png || fail "TransMLA figures written"
run "load $HF; convert mla-table kv-ranks 16 calib story.txt seqlen 32 to t4b.csv"
[ "$(rc)" = 0 ] || fail "mla-table: rc $(rc) [$(cat err.txt)]"
[ "$(head -1 t4b.csv)" = "kv_rank,pca,balance,mean_alpha,mean_rope_energy,mean_joint_energy,nll,ppl" ] \
    || fail "mla-table's columns say mean: [$(head -1 t4b.csv)]"
grep -q "^stories260K-hf layers 0-4, RoPE dims 8 (freqfold 1), .*; alpha, rope_energy and joint_energy are means over these 5 layers" out.txt \
    || fail "mla-table's headline says mean: [$(head -2 out.txt)]"

# ---- 3. compare on windowed models: the window on both sides
# exact FILE: methods other than TransMLA with out_err and score_err below 1e-5 in every layer
exact() {
    [ -f "$1" ] || { echo "no $1"; return; }
    python3 - "$1" <<'EOF'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["method"] != "transmla"]
bad = [(r["layer"], r["method"], r["out_err"]) for r in rows if not (float(r["out_err"]) < 1e-5 and float(r["score_err"]) < 1e-5)]
print(bad if bad or not rows else "ok")
EOF
}
run "synth family gemma2 g2; synth family mixtral mx"
[ "$(rc)" = 0 ] || fail "synth: rc $(rc) [$(cat err.txt)]"
for fam in g2 mx; do
    run "load $fam; info; compare kv-budget 128 tokens 32 to $fam-full.csv; compare kv-budget 64 tokens 32 to $fam-half.csv"
    [ "$(rc)" = 0 ] || fail "$fam: compare on a windowed model runs: rc $(rc) [$(cat err.txt)]"
    grep -q "sliding window\|sliding_window" out.txt || fail "$fam: info names its window: [$(cat out.txt)]"
    [ "$(grep -c "^the model's sliding windows$([ $fam = g2 ] && echo ' and score soft-cap') applied to every method as to the model (per layer)" out.txt)" = 2 ] \
        || fail "$fam: compare's headline says the window is applied: [$(grep -v '^ *[0-9]' out.txt)]"
    [ "$(exact "$fam-full.csv")" = ok ] || fail "$fam: exact at the full cache: $(exact "$fam-full.csv")"
    [ "$(grep -c ',transmla,64,' "$fam-half.csv")" -ge 1 ] || fail "$fam: TransMLA at 64: [$(grep transmla "$fam-half.csv")]"
done

# ---- 4. one error notation
run "set format csv; load $HF; calibrate story.txt; kvsvd learn kqsvd rank 4 to learn.csv; kvsvd eval to eval.csv; plot kvsvd-errors what kq to k.svg; plot compare kv-budget 48 to c.svg; plot compare-budgets budgets 32,48 what score to cb.svg"
[ "$(rc)" = 0 ] || fail "kvsvd / figures: rc $(rc) [$(cat err.txt)]"
[ "$(head -1 learn.csv | cut -d, -f1-8)" = "$(head -1 eval.csv | cut -d, -f1-8)" ] \
    || fail "learn and eval share their columns: [$(head -1 learn.csv)] [$(head -1 eval.csv)]"
[ "$(head -1 eval.csv)" = "layer,method,rank_k,rank_v,k_err,q_err,v_err,kq_err,out_err" ] || fail "eval header: [$(head -1 eval.csv)]"
awk -F, 'NR > 1 && ($3 != 4 || $4 != 4) { exit 1 }' eval.csv || fail "eval's rank_k, rank_v: [$(cat eval.csv)]"
has "$(svg_text c.svg)" "out_err = ||Y - Y'|| / ||Y||" || fail "plot compare's axis: [$(svg_text c.svg)]"
has "$(svg_text cb.svg)" "score_err = ||Y - Y'|| / ||Y|| (mean over layers)" || fail "compare-budgets' axis: [$(svg_text cb.svg)]"
has "$(svg_text k.svg)" "kq_err = ||Y - Y'|| / ||Y||" || fail "kvsvd-errors' axis: [$(svg_text k.svg)]"
hasnt "$(svg_text c.svg) $(svg_text k.svg)" "||b - a||\|M~" || fail "an old notation left"

cli_done
