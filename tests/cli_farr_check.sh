#!/usr/bin/env bash
# cli_farr_check.sh -- FaRR's `check` and `check DIR` answer the same question the same way and
# agree with `compare` (issue 25 §1/§4 follow-up):
#   1. `check DIR` of a FaRR export (dense f32 / bf16, factors) prints, after its fused-map check,
#      the in-session check's per-layer table on the export's weights (the same out_err; bf16
#      within its added error) and the perplexity before / after on `text FILE` (the same numbers);
#   2. check draws its tokens as compare does (seed, and the calibration's second moment in a
#      calibrated session): its out_err and its compare_out_err column are compare's farr row;
#   3. a full-rank QK cut on models with Q/K biases (gpt2, gpt_neox) has score_err < 1e-5 (scores
#      compared up to the per-query shift that dropping b_K makes).
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/lib_cli.sh"
cli_setup /tmp/attnlab-cli-farr-check shared-cache
cd "$T" || exit 1
HF=$SRC/tests/models/stories260K-hf
TXT=$SRC/examples/tinystory.txt

# the numbers "before after" of the perplexity line of out.txt's line matching $1
ppl_of() { grep "^perplexity on" out.txt | grep "$1" | sed -n 's/.*: \([0-9.]*\) before (source), \([0-9.]*\) after.*/\1 \2/p'; }
# columns 1-3 of two CSVs agree within a relative tolerance
same_errs() {
    paste -d, <(cut -d, -f1-3 "$1") <(cut -d, -f1-3 "$2") | awk -F, -v tol="$3" '
        NR == 1 { next } { n++ }
        $1 != $4 { bad = 1 }
        { for (k = 2; k <= 3; k++) { d = $k - $(k + 3); if (d < 0) d = -d; if (d > tol * ($k > 1e-3 ? $k : 1e-3)) bad = 1 } }
        END { exit bad || n < 1 }'
}

# ---- 1. check DIR = check, on every format the model allows
run -e "load $HF as s; truncate vo rank 4; check text $TXT to s.csv; export D format dense; export B format dense dtype bf16;
export F format factors; check D text $TXT to d.csv; check B text $TXT to b.csv; check F text $TXT to f.csv"
[ "$(rc)" = 0 ] || fail "check / check DIR: rc $(rc): $(cat err.txt)"
[ "$(head -1 s.csv)" = "layer,score_err,out_err,compare_out_err" ] || fail "check columns: [$(head -1 s.csv)]"
for f in d b f; do
    [ "$(head -1 $f.csv)" = "layer,score_err,out_err" ] || fail "check DIR columns ($f): [$(cat $f.csv)]"
    [ "$(tail -n +2 $f.csv | wc -l)" = 5 ] || fail "check DIR rows ($f): [$(cat $f.csv)]"
done
same_errs s.csv d.csv 1e-6 || fail "dense f32 export's errors [$(cat d.csv)] are not the session's [$(cat s.csv)]"
same_errs s.csv f.csv 1e-6 || fail "factors export's errors [$(cat f.csv)] are not the session's [$(cat s.csv)]"
same_errs s.csv b.csv 1e-2 || fail "bf16 export's errors [$(cat b.csv)] are not within its added error of [$(cat s.csv)]"
[ "$(grep -c "^PASS: the export's fused maps are the plan's" out.txt)" = 3 ] || fail "fused-map part: [$(cat out.txt)]"
grep -q "^the export's layers (D loaded as a model) against s, per truncated layer: .* on 64 random Gaussian tokens, seed 20250607 (compare's), unit variance" out.txt ||
    fail "check DIR headline: [$(cat out.txt)]"
in_session=$(ppl_of "the working copy, in the session")
[ -n "$in_session" ] || fail "in-session perplexity line: [$(cat out.txt)]"
[ "$(grep "^perplexity on" out.txt | grep -c "after (the export, its own forward pass)")" = 3 ] ||
    fail "check DIR perplexity lines: [$(cat out.txt)]"
[ "$(ppl_of "the export, its own" | head -1)" = "$in_session" ] ||
    fail "dense export's perplexity [$(ppl_of "the export, its own" | head -1)] is not the session's [$in_session]"
[ "$(ppl_of "the export, its own" | sed -n 3p)" = "$in_session" ] || fail "factors export's perplexity: [$(cat out.txt)]"
grep "^perplexity on" out.txt | grep "the export, its own" | sed -n 2p | grep -q "3.7555 before (source), 9.7[0-9]* after" ||
    fail "bf16 export's perplexity: [$(cat out.txt)]"

# ---- 2. check's tokens are compare's: unit variance, then a calibrated session
run -e "load $HF as s; truncate vo rank 4; check to c.csv; compare kv-budget 48 to k.csv"
[ "$(rc)" = 0 ] || fail "check + compare: rc $(rc): $(cat err.txt)"
grep "^farr\|,farr," k.csv | cut -d, -f1,6 >kf.csv
awk -F, 'NR > 1 { print $1 "," $3 }' c.csv >co.csv
awk -F, 'NR > 1 { print $1 "," $4 }' c.csv >cc.csv
cmp -s co.csv kf.csv || fail "check's out_err [$(cat co.csv)] is not compare's farr [$(cat kf.csv)]"
cmp -s cc.csv kf.csv || fail "check's compare_out_err [$(cat cc.csv)] is not compare's farr [$(cat kf.csv)]"
awk -F, 'NR == 2 { exit !($3 > 0.5825 && $3 < 0.5835) }' c.csv || fail "layer 0 out_err (compare's 0.583): [$(cat c.csv)]"
grep -q "seed 20250607 (compare's), unit variance (the session has no calibration of s with attention inputs), as \`compare\` draws them" out.txt ||
    fail "check says which tokens: [$(cat out.txt)]"
run -e "load $HF as s; calibrate $TXT seqlen 64; truncate vo rank 4; check to c.csv; compare kv-budget 48 to k.csv"
[ "$(rc)" = 0 ] || fail "calibrated check + compare: rc $(rc): $(cat err.txt)"
grep ",farr," k.csv | cut -d, -f1,6 >kf.csv
awk -F, 'NR > 1 { print $1 "," $3 }' c.csv >co.csv
cmp -s co.csv kf.csv || fail "calibrated: check's out_err [$(cat co.csv)] is not compare's farr [$(cat kf.csv)]"
awk -F, 'NR == 2 { exit !($3 > 0.6635 && $3 < 0.6645) }' c.csv || fail "calibrated layer 0 out_err (0.664): [$(cat c.csv)]"
grep -q "with each layer's input second moment from the session's calibration of s (1024 tokens), as \`compare\` draws them" out.txt ||
    fail "calibrated check says which tokens: [$(cat out.txt)]"

# ---- 3. full-rank QK cuts with Q/K biases: scores exact up to the per-query shift
run -e "synth family gpt_neox nx; load demo-gpt2; truncate qk rank 32; check to g.csv; load nx; truncate qk rank 24; check to n.csv"
[ "$(rc)" = 0 ] || fail "full-rank QK checks: rc $(rc): $(cat err.txt)"
for f in g n; do
    [ "$(tail -n +2 $f.csv | wc -l)" -ge 3 ] || fail "rows of $f.csv: [$(cat $f.csv)]"
    awk -F, 'NR > 1 && !($2 < 1e-5 && $3 < 1e-5) { bad = 1 } END { exit bad }' $f.csv ||
        fail "full-rank QK cut ($f): score_err / out_err not < 1e-5: [$(cat $f.csv)]"
done
grep -q "scores up to a constant per query (score_err; the softmax ignores such a shift, which dropping b_K makes)" out.txt ||
    fail "check says how scores compare: [$(cat out.txt)]"

cli_done
