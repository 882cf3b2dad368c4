#!/usr/bin/env bash
# cli_act_tmla.sh -- the activation-based TransMLA through `attnlab -e`: convert mla with a
# calibration text (token ids on the demo model; a composed text on stories260K): the statistics
# narration, perplexity before and after (finite; the export is what runs after), `stats weights`
# and `stats act` errors; convert mla-table (Figure 4b) and its CSV; plot rope-removal (Figure 3b)
# with its data file, starting at the original log-perplexity; key-norms from activations; the
# session's `calibrate` statistics feeding convert; Lua access to the table.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-act-tmla shared-cache
cd "$T" || exit 1
png() { is_png "$1" && [ "$(stat -c %s "$1")" -gt 10000 ]; }

# token ids for the demo model (vocab 256): a fixed pseudo-random stream
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt

# ---- errors
run -e "load demo-llama; convert mla kv-rank 48 stats act"
[ "$(rc)" = 1 ] && grep -q "stats act needs calibration activations" err.txt || fail "stats act without data: [$(cat err.txt)]"
run -e "load demo-llama; convert mla kv-rank 48 calib x.txt ids ids.txt"
[ "$(rc)" = 1 ] && grep -q "not both" err.txt || fail "calib and ids: [$(cat err.txt)]"
run -e "load demo-llama; convert mla kv-rank 48 ids ids.txt seqlen 400"
[ "$(rc)" = 1 ] && grep -q "less than one calibration window" err.txt || fail "seqlen too long: [$(cat err.txt)]"
run -e "load demo-llama; convert mla-table kv-ranks 24"
[ "$(rc)" = 1 ] && grep -q "needs a text for perplexity" err.txt || fail "table without a text: [$(cat err.txt)]"
run -e "load demo-llama; convert mla-table kv-ranks 24,x ids ids.txt"
[ "$(rc)" = 1 ] && grep -q "kv-ranks '24,x'" err.txt || fail "bad kv-ranks: [$(cat err.txt)]"

# ---- convert mla with activation statistics and the perplexity before / after
run -e "load demo-llama as d; convert mla kv-rank 48 rope-dim 16 ids ids.txt samples 4 seqlen 32 to conv.csv"
[ "$(rc)" = 0 ] || fail "convert with ids: rc $(rc) [$(cat err.txt)]"
grep -q "activation statistics of d: 4 windows x 32 tokens of ids.txt" out.txt || fail "statistics narration: [$(cat out.txt)]"
grep -q "PCA statistics: activations of 4 x 32 tokens of ids.txt" out.txt || fail "PCA narration"
grep -q "relative Frobenius errors on 64 random Gaussian tokens, seed 20250601 (with the activations' mean and covariance)" out.txt || fail "error inputs"
# perplexity on the held-out validation split (window 8 of 9: tokens 256-299), not the calibrated windows
line=$(grep "^perplexity on 42 tokens, held out (the validation split of ids.txt, tokens 256-299), windows of 32: " out.txt)
[ -n "$line" ] || fail "perplexity line: [$(cat out.txt)]"
echo "$line" | grep -q "after = the converted layers in memory at its DeepSeek-V3 export's norm eps" || fail "perplexity route: [$line]"
before=$(echo "$line" | sed -E 's/.*: ([0-9.e+]+) before, ([0-9.e+]+) after.*/\1/')
after=$(echo "$line" | sed -E 's/.*: ([0-9.e+]+) before, ([0-9.e+]+) after.*/\2/')
awk -v a="$before" -v b="$after" 'BEGIN { exit !(a > 1 && a < 1e6 && b > 1 && b < 1e6) }' || fail "perplexities $before / $after"
[ "$(wc -l < conv.csv)" = 5 ] || fail "conv.csv rows"
# the same model as loaded, through `ppl` on those held-out tokens: the `before` number
cut -d' ' -f257-300 ids.txt > valid.txt
run -e "load demo-llama; ppl ids valid.txt seqlen 32 to p.csv"
near "$(sed -n 2p p.csv | cut -d, -f3)" "$before" 1e-4 || fail "ppl $(sed -n 2p p.csv) vs before $before"
# weights, with the text still giving the perplexity; ppl off
run -e "load demo-llama; convert mla kv-rank 48 rope-dim 16 ids ids.txt seqlen 32 stats weights"
grep -q "PCA statistics: weights (unit-variance inputs)" out.txt && grep -q "^perplexity on 42 tokens, held out" out.txt \
    || fail "stats weights: [$(cat out.txt)]"
grep -q "activation statistics of" out.txt && fail "stats weights computed activation statistics"
run -e "load demo-llama; convert mla kv-rank 48 ids ids.txt seqlen 32 ppl off"
grep -q "^perplexity on" out.txt && fail "ppl off still measured it"
# a subset of layers: the converted layers run in memory
run -e "load demo-llama; convert mla kv-rank 48 rope-dim 16 layers 1-2 ids ids.txt seqlen 32"
[ "$(rc)" = 0 ] && grep -q "after = the converted layers swapped in memory" out.txt || fail "layers 1-2: [$(cat out.txt) $(cat err.txt)]"

# ---- Figure 4b table
run -e "load demo-llama; convert mla-table kv-ranks 24,full ids ids.txt seqlen 32 to t4b.csv"
[ "$(rc)" = 0 ] || fail "mla-table: rc $(rc) [$(cat err.txt)]"
[ "$(head -1 t4b.csv)" = "kv_rank,pca,balance,mean_alpha,mean_rope_energy,mean_joint_energy,nll,ppl" ] || fail "t4b header: [$(head -1 t4b.csv)]"
[ "$(wc -l < t4b.csv)" = 9 ] || fail "t4b rows: $(wc -l < t4b.csv)"
[ "$(sed -n 2p t4b.csv | cut -d, -f1-3)" = "24,W,off" ] && [ "$(sed -n 9p t4b.csv | cut -d, -f1-3)" = "96,WX,on" ] \
    || fail "t4b order: [$(cut -d, -f1-3 t4b.csv | tr '\n' ' ')]"
awk -F, 'NR > 1 && !($8 > 1 && $8 < 1e6) { bad = 1 } END { exit bad }' t4b.csv || fail "t4b perplexities"
# WX keeps at least the W key energy on the activations
awk -F, 'NR == 2 { w = $5 } NR == 4 { x = $5 } END { exit !(x >= w - 1e-9) }' t4b.csv || fail "WX rope energy below W"

# ---- Figure 3b
run -e "load demo-llama; plot rope-removal ids ids.txt seqlen 32 removed 0,0.5,0.875 freqfolds 1,2 data rr.csv to rr.png"
[ "$(rc)" = 0 ] || fail "rope-removal: rc $(rc) [$(cat err.txt)]"
png rr.png || fail "rr.png is not a PNG figure"
[ "$(head -1 rr.csv)" = "method,freqfold,removed,rope_dims,key_energy,nll,ppl" ] || fail "rr.csv header"
base=$(grep -o "original [0-9.]*" out.txt | head -1 | cut -d' ' -f2)
first=$(awk -F, '$1 == "RoRoPE" && $2 == 1 && $3 == 0 { print $6 }' rr.csv)
near "$first" "$base" 1e-4 || fail "RoRoPE with nothing removed: $first vs original $base"
first=$(awk -F, '$1 == "MHA2MLA" && $3 == 0 { print $6 }' rr.csv)
near "$first" "$base" 1e-4 || fail "MHA2MLA with nothing removed: $first vs original $base"
[ "$(grep -c "^RoRoPE,1," rr.csv)" = 3 ] && [ "$(grep -c "^RoRoPE,2," rr.csv)" = 3 ] || fail "rr.csv points: [$(cat rr.csv)]"
run -e "load demo-llama; plot rope-removal"
[ "$(rc)" = 1 ] && grep -q "needs a text for perplexity" err.txt || fail "rope-removal without text: [$(cat err.txt)]"

# ---- Lua: the table is a value
run -e "load demo-llama" -e "lua r = attn.convert('mla-table', {['kv-ranks'] = '32', ids = 'ids.txt', seqlen = 32}); print(#r, r[3].pca, r[4].balance, r[1].ppl > 1)"
[ "$(rc)" = 0 ] && grep -q "^4	WX	on	true$" out.txt || fail "lua mla-table: [$(cat out.txt) $(cat err.txt)]"

# ---- the real stories260K with a composed text
M="${ATTNLAB_MODELS:-}/stories260K/stories260K.bin"
if [ -f "$M" ]; then
    cat > story.txt <<'EOF'
Once upon a time, there was a little girl named Lily. She liked to play in the park with her red ball.
One day, Lily saw a big dog near the tree. The dog was sad because it could not find its home.
Lily said, "Do not be sad, dog. I will help you." They walked together to the house with the blue door.
The mom of the dog was very happy. She gave Lily a cookie and a big hug. Lily smiled and went home.
The next day, Tom came to play with Lily. Tom had a toy car that was very fast. They played all day
and laughed a lot. When the sun went down, Tom said, "I am tired. Let us go home." Lily waved goodbye.
She ate her dinner and went to bed. She dreamed of the dog, the park and her friend Tom.
EOF
    run -e "load '$M' as s; convert mla kv-rank 40 calib story.txt seqlen 64; plot key-norms layer 0 to kn.png; plot key-norms layer 0 stats weights to knw.png"
    [ "$(rc)" = 0 ] || fail "stories260K: rc $(rc) [$(cat err.txt)]"
    line=$(grep "^perplexity on [0-9]* tokens, held out (the validation split of story.txt" out.txt)
    before=$(echo "$line" | sed -E 's/.*: ([0-9.e+]+) before, ([0-9.e+]+) after.*/\1/')
    after=$(echo "$line" | sed -E 's/.*: ([0-9.e+]+) before, ([0-9.e+]+) after.*/\2/')
    # the trained model knows such stories (ppl well under the vocabulary of 512); the conversion costs some
    awk -v a="$before" -v b="$after" 'BEGIN { exit !(a > 1 && a < 20 && b > a && b < 512) }' \
        || fail "stories260K perplexities $before / $after [$line]"
    png kn.png && png knw.png || fail "key-norm figures"
    cmp -s kn.png knw.png && fail "activation and weight key norms drew the same figure"
    # the session's calibration feeds convert (its text read back for the perplexity)
    run -e "load '$M' as s; calibrate story.txt samples 4 seqlen 64; convert mla kv-rank 40"
    [ "$(rc)" = 0 ] || fail "calibrate + convert: rc $(rc) [$(cat err.txt)]"
    grep -q "PCA statistics: activations of the session's calibration ([0-9]* tokens of story.txt)" out.txt \
        || fail "session calibration narration: [$(grep PCA out.txt)]"
    grep -q "^perplexity on [0-9]* tokens, held out (the validation split of story.txt, .*), windows of 64" out.txt \
        || fail "session calibration perplexity: [$(grep perplexity out.txt)]"
else
    echo "note: $M not found: the stories260K part is skipped"
fi

cli_done
