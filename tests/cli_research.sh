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
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(d <= t * m) }'; }
# token ids for the demo model (vocab 256), 300 of them: 9 windows of 32, the last one validation
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
cut -d' ' -f257-300 ids.txt > valid.txt

# ---- item 6: truncate counts the KV cache as info, convert and kv-cache do (K+V per token per layer)
run -e "load demo-llama; truncate vo rank 8"
[ "$(rc)" = 0 ] || fail "truncate: rc $(rc) [$(cat err.txt)]"
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

cli_done
