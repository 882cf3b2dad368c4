#!/usr/bin/env bash
# cli_research.sh -- issue 15, items 3-7, through `attnlab -e` on the demo model: one error
# definition and column scheme, the inputs every error was measured on (with its seed), `check`
# reproducing a calibrated `convert mla`, held-out perplexity (the validation split by default,
# in-sample said so, `eval-ids FILE`), `kvsvd eval split train` = the calibrated windows, the KV
# cache in one unit (K+V values per token per layer), and the notes on what TransMLA cannot keep.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-research shared-cache
cd "$T" || exit 1
# |a - b| <= tol * |b|
# token ids for the demo model (vocab 256), 300 of them: 9 windows of 32, the last one validation
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
cut -d' ' -f257-300 ids.txt > valid.txt

# ---- item 6: truncate counts the KV cache as info, convert and kv-cache do (K+V per token per layer)
run -e "load demo-llama; truncate vo rank 8 to trunc.csv"
[ "$(rc)" = 0 ] || fail "truncate: rc $(rc) [$(cat err.txt)]"
# the table's kv columns in the same unit: K+V per token in each layer (total row: their mean)
[ "$(awk -F, 'NR > 1 { print ($11 == "true" ? "total" : $1) ":" $9 ":" $10 }' trunc.csv | tr '\n' ' ')" = "0:128:80 1:128:80 2:128:80 3:128:80 total:128:80 " ] \
    || fail "truncate table KV columns: [$(cat trunc.csv)]"
grep -q "KV cache per token per layer (K+V, mean over the 4 layers): 128 -> 80 values (62.5%); whole model 1024 -> 640 bytes per token" out.txt \
    || fail "truncate KV unit: [$(cat out.txt)]"
grep -q "values per token over these layers" out.txt && fail "truncate still counts V only over the layers"
run -e "load demo-llama; truncate vo rank 8 layers 1"
grep -q "(K+V, mean over the 4 layers): 128 -> 116 values (90.6%); whole model 1024 -> 928 bytes" out.txt \
    || fail "truncate one layer: [$(cat out.txt)]"

# ---- item 7: kv-rank full on a GQA model says why it is not lossless
run -e "load demo-llama; convert mla kv-rank full"
[ "$(rc)" = 0 ] || fail "convert full: rc $(rc) [$(cat err.txt)]"
grep -q "^note: kv-rank full keeps every latent direction but is not lossless: the merged key has 2 x 32 = 64 RoPE dims and MLA keeps one RoPE key of 32" out.txt \
    || fail "kv-rank full note: [$(cat out.txt)]"
# ... and FreqFold's curve starting above the original is explained in the figure and the text
run -e "load demo-llama; plot rope-removal ids ids.txt seqlen 32 removed 0,0.5 freqfolds 1,2 to rr.png"
[ "$(rc)" = 0 ] || fail "rope-removal: rc $(rc) [$(cat err.txt)]"
grep -q "^FreqFold 2 starts above the original even with nothing removed: each group of 2 adjacent RoPE frequencies turns at its first one, and in a head of 32 dims neighbours differ by x1.78" out.txt \
    || fail "FreqFold note: [$(cat out.txt)]"
is_png rr.png || fail "rr.png is not a PNG"
grep -q "log-perplexity on 42 tokens, held out (the validation split of ids.txt, tokens 256-299)" out.txt \
    || fail "rope-removal on held-out tokens: [$(cat out.txt)]"

# ---- item 5: perplexity on held-out tokens by default; in-sample said so; a held-out text
run -e "load demo-llama; convert mla kv-rank 48 rope-dim 16 ids ids.txt samples 4 seqlen 32"
held=$(grep "^perplexity on 42 tokens, held out (the validation split of ids.txt, tokens 256-299), windows of 32: " out.txt)
[ -n "$held" ] || fail "held-out perplexity by default: [$(cat out.txt)]"
run -e "load demo-llama; convert mla kv-rank 48 rope-dim 16 ids ids.txt samples 4 seqlen 32 split train"
grep -q "^perplexity on 124 tokens, in-sample (the calibrated windows of ids.txt, tokens 0-127), windows of 32: " out.txt \
    || fail "split train: [$(grep perplexity out.txt)]"
run -e "load demo-llama; convert mla kv-rank 48 rope-dim 16 ids ids.txt samples 4 seqlen 32 eval-ids valid.txt"
line=$(grep "^perplexity on 42 tokens, held out (valid.txt, not calibrated on), windows of 32: " out.txt)
[ -n "$line" ] || fail "eval-ids: [$(grep perplexity out.txt)]"
# the same tokens: the same numbers as the default validation split
[ "$(echo "$line" | sed 's/.*windows of 32: //')" = "$(echo "$held" | sed 's/.*windows of 32: //')" ] \
    || fail "eval-ids valid.txt differs from the validation split: [$line] [$held]"
run -e "load demo-llama; convert mla kv-rank 48 ids valid.txt seqlen 32"
grep -q "^perplexity on 42 tokens, in-sample (valid.txt has no validation window of 32 tokens: give eval FILE for a held-out text)" out.txt \
    || fail "too short for a validation split: [$(grep perplexity out.txt)]"
run -e "load demo-llama; convert mla kv-rank 48 ids valid.txt seqlen 32 split valid"
[ "$(rc)" = 1 ] && grep -q "too few for a validation split" err.txt || fail "split valid of a short text: rc $(rc) [$(cat err.txt)]"
run -e "load demo-llama; convert mla kv-rank 48 ids ids.txt seqlen 32 split train eval-ids valid.txt"
[ "$(rc)" = 1 ] && grep -q "not both" err.txt || fail "split and eval: rc $(rc) [$(cat err.txt)]"
run -e "load demo-llama; convert mla-table kv-ranks 24 ids ids.txt samples 4 seqlen 32"
grep -q "^perplexity on 42 tokens, held out (the validation split of ids.txt" out.txt || fail "mla-table held out: [$(cat out.txt)]"

# ---- item 3: one error definition (relative Frobenius, unsquared: test_kqsvd checks it against
# formed matrices), one column scheme (<what>_err), one method token (kqsvd), the tokens named
run -e "load demo-llama; calibrate ids ids.txt seqlen 32 samples 4; kvsvd learn all rank 4 to learn.csv; kvsvd eval to eval.csv; kvsvd eval split train to train.csv"
[ "$(rc)" = 0 ] || fail "kvsvd: rc $(rc) [$(cat err.txt)]"
[ "$(head -1 learn.csv)" = "layer,method,rank_k,rank_v,k_err,q_err,v_err,kq_err,vo_err" ] || fail "learn header: [$(head -1 learn.csv)]"
[ "$(head -1 eval.csv)" = "layer,method,rank_k,rank_v,k_err,q_err,v_err,kq_err,out_err" ] || fail "eval header: [$(head -1 eval.csv)]"
grep -q "^rank 4; relative Frobenius errors on the calibration set (128 tokens of ids.txt, in-sample)" out.txt \
    || fail "learn narration: [$(cat out.txt)]"
grep -q "^evaluating 3 methods on 1 validation window of 32 tokens of ids.txt (held out)" out.txt || fail "eval narration: [$(cat out.txt)]"
grep -q "^  KQ-SVD  k_err .* out_err " out.txt || fail "eval summary columns: [$(cat out.txt)]"
# ---- item 5: `kvsvd eval split train` is exactly the 4 calibrated windows (8 are training windows)
grep -q "^evaluating 3 methods on 4 calibrated windows of 32 tokens of ids.txt (in-sample)" out.txt \
    || fail "split train = the calibrated windows: [$(cat out.txt)]"
grep -q "^4 sequences in" out.txt || fail "split train ran 4 sequences: [$(grep sequences out.txt)]"
run -e "load demo-llama; calibrate ids ids.txt seqlen 32 samples 4; kvsvd learn kqsvd rank 4; kvsvd eval split train seqlen 16"
[ "$(rc)" = 1 ] && grep -q "split train is the 4 calibrated windows of 32 tokens" err.txt || fail "split train seqlen: [$(cat err.txt)]"

# ---- item 4: compare prints its seed and reproduces with it; reuses the calibration and kvsvd learn
run -e "load demo-llama; compare kv-budget 96 layers 1 tokens 16 seed 5 to c1.csv; compare kv-budget 96 layers 1 tokens 16 seed 5 to c2.csv; compare kv-budget 96 layers 1 tokens 16 to c3.csv"
[ "$(rc)" = 0 ] || fail "compare seed: rc $(rc) [$(cat err.txt)]"
grep -q "relative Frobenius errors on 16 random Gaussian tokens, seed 5 (unit variance)" out.txt || fail "compare seed printed: [$(cat out.txt)]"
grep -q "relative Frobenius errors on 16 random Gaussian tokens, seed 20250607 (unit variance)" out.txt || fail "default seed printed"
cmp -s c1.csv c2.csv || fail "the same seed gives other numbers"
cmp -s c1.csv c3.csv && fail "another seed gives the same numbers"
grep -q "^1,kqsvd,96," c1.csv || fail "compare's method token kqsvd: [$(cat c1.csv)]"
grep -q "kq-svd" c1.csv out.txt && fail "method spelled kq-svd"
grep -q "^KQ-SVD's projections: learned at the budget from random tokens (no calibration)" out.txt || fail "KQ-SVD source, none"
run -e "load demo-llama; calibrate ids ids.txt seqlen 32; compare kv-budget 96 layers 1 tokens 16; kvsvd learn kqsvd rank 8; compare kv-budget 96 layers 1 tokens 16 to c4.csv"
[ "$(rc)" = 0 ] || fail "compare with calibration: rc $(rc) [$(cat err.txt)]"
grep -q "^KQ-SVD's projections: learned at the budget from the session's calibration" out.txt \
    && grep -q "R_K 24, R_V 24 per KV head (calibration, 256 tokens)" out.txt || fail "compare reuses the calibration: [$(cat out.txt)]"
grep -q '^1,kqsvd,96,"\?R_K 24, R_V 24 per KV head (calibration, 256 tokens)' c4.csv \
    || fail "compare refits KQ-SVD at the budget, not kvsvd learn's rank 8: [$(cat c4.csv)]"
run -e "load demo-llama; calibrate ids ids.txt seqlen 32; kvsvd learn kqsvd rank 24; compare kv-budget 96 layers 1 tokens 16 to c5.csv"
grep -q "^KQ-SVD's projections: those \`kvsvd learn kqsvd\` made, reused: their ranks are the budget's" out.txt &&
    grep -q '^1,kqsvd,96,"\?R_K 24, R_V 24 per KV head (reused: kvsvd learn' c5.csv || fail "same ranks: reused, labelled: [$(cat c5.csv)]"
# plot compare follows the last compare's seed, or takes its own
run -e "load demo-llama; compare kv-budget 96 layers 1 tokens 16 seed 5; plot compare to p5.png; plot compare seed 6 to p6.png"
[ "$(rc)" = 0 ] || fail "plot compare seed: rc $(rc) [$(cat err.txt)]"
grep -q "the session's last compare; 16 random Gaussian tokens, seed 5 (unit variance)" out.txt \
    && grep -q "compared now (kept for the next plot); 16 random Gaussian tokens, seed 6 (unit variance)" out.txt \
    || fail "plot compare seeds: [$(grep 'KV budget' out.txt)]"
# check after a calibrated convert mla: the same inputs (calibration, seed, tokens), the same numbers
run -e "load demo-llama as d; convert mla kv-rank 48 rope-dim 16 ids ids.txt samples 4 seqlen 32 ppl off to conv.csv; check to chk.csv"
[ "$(rc)" = 0 ] || fail "convert + check: rc $(rc) [$(cat err.txt)]"
grep -q "^relative Frobenius errors per layer on 64 random Gaussian tokens, seed 20250601, with the mean and second moment of the conversion's calibration (128 tokens of ids.txt; digest" out.txt \
    || fail "check names its inputs: [$(cat out.txt)]"
for l in 2 3 4 5; do
    near "$(sed -n ${l}p chk.csv | cut -d, -f3)" "$(sed -n ${l}p conv.csv | cut -d, -f6)" 1e-4 \
        || fail "check row $l: $(sed -n ${l}p chk.csv) vs convert's $(sed -n ${l}p conv.csv)"
done
run -e "load demo-llama; convert mla kv-rank 48 rope-dim 16 tokens 16 seed 7 to s7.csv; check to k7.csv; check seed 8 tokens 16"
grep -q "^relative Frobenius errors on 16 random Gaussian tokens, seed 7 (unit variance)" out.txt || fail "convert seed: [$(cat out.txt)]"
grep -q "^relative Frobenius errors per layer on 16 random Gaussian tokens, seed 7, unit variance (the conversion's own" out.txt || fail "check follows the conversion's seed"
grep -q "^relative Frobenius errors per layer on 16 random Gaussian tokens, seed 8, unit variance (\`tokens\`/\`seed\` as given)" out.txt || fail "check seed 8"
near "$(sed -n 2p k7.csv | cut -d, -f3)" "$(sed -n 2p s7.csv | cut -d, -f6)" 1e-4 || fail "seed 7: check differs from convert"
run -e "load demo-llama; convert tpa kv-rank 1 seed 9; check seed 4"
grep -q "relative Frobenius errors on 64 random Gaussian tokens, seed 9 + layer (unit variance)" out.txt \
    && grep -q "relative Frobenius errors per layer on 64 random Gaussian tokens, seed 4 + layer, unit variance" out.txt || fail "tpa seeds: [$(cat out.txt)]"

cli_done
