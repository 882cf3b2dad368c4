#!/usr/bin/env bash
# cli_compare_text.sh -- `compare kv-budget B text FILE` (and ids FILE, heldout): every KV-cache reduction at one
# budget on real tokens through the forward pass, width (weight-space methods) against length (token eviction:
# StreamingLLM, H2O, SnapKV) and both. On stories260K-hf (5 layers, 4 KV heads of 8: 64 values per token per
# layer): a row for every method with a perplexity (KQ-SVD's says why it has none); at the model's own budget
# every eviction and every exact width method (FaRR, TPA, mean-pool) has the model's perplexity, which is `ppl`'s;
# at half the budget the eviction cache holds the same keys read per window (37 of 128 tokens: 49.3%), every
# eviction changes the perplexity, and a combination whose width half is exact (FaRR at 2B = the model) equals
# StreamingLLM alone (the evaluator's window + sink tokens against the pass's key mask); ids FILE equals the text's
# ids; `plot compare-budgets text FILE` draws the perplexity of every method against its values per token; refusals.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-compare-text shared-cache
cd "$T" || exit 1
M="$ATTNLAB_MODELS/stories260K-hf"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"
run() { "$B" -e "$1" </dev/null >out.txt 2>err.txt; echo $? >rc.txt; }
# col METHOD N: field N of METHOD's CSV row (method,family,kv_values,setting,out_err,ppl,ppl_ratio; the setting
# may be quoted with commas, so fields are counted from the end: 1 = ppl_ratio, 2 = ppl, 3 = out_err).
col() { grep "^$1," out.txt | awk -F, -v n="$2" '{ print $(NF - n + 1) }'; }
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'; }

# ---- the model's own budget: nothing is lost
run "load $M; set format csv; ppl $TXT seqlen 128; compare kv-budget 64 text $TXT seqlen 128"
[ "$(rc)" = 0 ] || fail "budget 64: rc $(rc) [$(cat err.txt)]"
P0=$(grep -E '^[0-9]+,' out.txt | head -1 | awk -F, '{ print $3 }')
[ -n "$P0" ] || fail "ppl printed nothing: [$(head -3 out.txt)]"
close "$(col model 2)" "$P0" 1e-6 || fail "the model row's ppl $(col model 2), ppl's $P0"
for meth in streaming-llm h2o snapkv; do
    [ "$(col $meth 2)" = "$(col model 2)" ] || fail "$meth at a cache of every token: ppl $(col $meth 2), the model's $(col model 2)"
    grep -q "^$meth,eviction,64,\"\\?cache 128 tokens" out.txt || fail "$meth row: [$(grep "^$meth," out.txt)]"
done
for meth in farr tpa-a tpa-b mean-pool; do
    close "$(col $meth 2)" "$P0" 1e-5 || fail "$meth at the full budget: ppl $(col $meth 2), the model's $P0"
done
grep -q '^kqsvd,width,64,.*no perplexity: its projections act on the cached keys after RoPE' out.txt \
    || fail "kqsvd's row: [$(grep '^kqsvd,' out.txt)]"
grep -Eq '^transmla,width,64,"?R 56 \+ D 8' out.txt || fail "transmla's row: [$(grep '^transmla,' out.txt)]"

# ---- half the budget: the same keys read per window
run "load $M; set format csv; compare kv-budget 32 text $TXT seqlen 128"
[ "$(rc)" = 0 ] || fail "budget 32: rc $(rc) [$(cat err.txt)]"
grep -q "a cache of 37 tokens (49.3% of the keys read)" err.txt || fail "the capacity line: [$(grep cache err.txt)]"
n=$(grep -cE '^(model|farr|transmla|kqsvd|tpa-a|tpa-b|mean-pool|streaming-llm|h2o|snapkv|farr\+streaming-llm|transmla\+streaming-llm|tpa-a\+streaming-llm|tpa-b\+streaming-llm|mean-pool\+streaming-llm),' out.txt)
[ "$n" = 15 ] || fail "15 rows (the model, 6 width, 3 eviction, 5 combinations), got $n: [$(cat out.txt)]"
for meth in streaming-llm h2o snapkv; do
    grep -q "^$meth,eviction,31.55" out.txt || fail "$meth reads 31.55 values per token: [$(grep "^$meth," out.txt)]"
    p=$(col $meth 2)
    close "$p" "$P0" 1e-9 && fail "$meth at 37 tokens has the model's ppl $p"
    awk -v p="$p" 'BEGIN { exit !(p > 1 && p < 100) }' || fail "$meth ppl $p"
done
close "$(col farr+streaming-llm 2)" "$(col streaming-llm 2)" 1e-6 \
    || fail "FaRR at 64 (exact) + StreamingLLM: ppl $(col farr+streaming-llm 2), StreamingLLM alone $(col streaming-llm 2)"
grep -q '^farr,width,,"*n/a: keys under RoPE stay whole' out.txt || fail "FaRR cannot meet 32: [$(grep '^farr,' out.txt)]"
for meth in transmla tpa-a tpa-b mean-pool; do
    awk -v p="$(col $meth 2)" -v q="$P0" 'BEGIN { exit !(p > q) }' || fail "$meth at 32: ppl $(col $meth 2) not above $P0"
done
grep -Eq '^layer +farr +transmla +kqsvd +tpa-a +tpa-b +mean-pool +streaming-llm +h2o +snapkv$' err.txt \
    || fail "the per-layer table's header: [$(grep '^layer' err.txt)]"
[ "$(grep -cE '^[0-4] +n/a' err.txt)" = 5 ] || fail "5 layer lines: [$(cat err.txt)]"

# ---- ids FILE: the text's ids give the same numbers
"$B" -e "load $M; tokenize file $TXT to $T/ids.txt" </dev/null >/dev/null 2>&1
[ -s ids.txt ] || fail "tokenize wrote no ids.txt"
if [ -s ids.txt ]; then
    cp out.txt text.txt
    run "load $M; set format csv; compare kv-budget 32 ids ids.txt seqlen 128"
    [ "$(rc)" = 0 ] || fail "ids: rc $(rc) [$(cat err.txt)]"
    [ "$(grep '^h2o,' out.txt)" = "$(grep '^h2o,' text.txt)" ] || fail "ids vs text: [$(grep '^h2o,' out.txt)] [$(grep '^h2o,' text.txt)]"
fi

# ---- plot compare-budgets text FILE: perplexity against values per token, every method
run "load $M; plot compare-budgets text $TXT budgets 16,64 seqlen 64 to $T/wl.png"
[ "$(rc)" = 0 ] || fail "plot: rc $(rc) [$(cat err.txt)]"
is_png wl.png || fail "wl.png is not a PNG"
grep -q "^wrote $T/wl.png$" out.txt || fail "the path: [$(grep wrote out.txt)]"
p0=$(grep -E '^ +16 +model ' out.txt | awk '{ print $4 }')
[ -n "$p0" ] || fail "the table has no model row: [$(cat out.txt)]"
for meth in streaming-llm h2o snapkv; do
    [ "$(grep -E "^ +64 +$meth " out.txt | awk '{ print $4 }')" = "$p0" ] || fail "$meth at 64: [$(grep -E "^ +64 +$meth " out.txt)]"
    p=$(grep -E "^ +16 +$meth " out.txt | awk '{ print $4 }')
    awk -v p="$p" -v q="$p0" 'BEGIN { exit !(p > q) }' || fail "$meth at 16: ppl $p, the model's $p0"
done
[ "$(grep -cE '^ +(16|64) +' out.txt)" = 30 ] || fail "15 rows per budget: [$(cat out.txt)]"
run "load $M; plot compare-budgets text $TXT what score"
[ "$(rc)" != 0 ] && grep -q "drop layers / tokens / seed / what" err.txt || fail "what with text: [$(cat err.txt)]"

# ---- refusals
run "load $M; compare kv-budget 32 text $TXT layers 0-1"
[ "$(rc)" != 0 ] && grep -q "drop layers / tokens / seed" err.txt || fail "layers with text: rc $(rc) [$(cat err.txt)]"
run "load $M; compare kv-budget 32 text $TXT heldout"
[ "$(rc)" != 0 ] && grep -q "give one of text FILE, ids FILE, heldout" err.txt || fail "text and heldout: [$(cat err.txt)]"
run "load $M; compare kv-budget 32 heldout"
[ "$(rc)" != 0 ] && grep -q "calibrate" err.txt || fail "heldout without calibration: [$(cat err.txt)]"
run "load demo-llama; compare kv-budget 32 text $TXT"
[ "$(rc)" != 0 ] && grep -q "^error: compare: text .*no tokenizer beside" err.txt || fail "no tokenizer: [$(cat err.txt)]"
cli_done
