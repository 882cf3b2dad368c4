#!/usr/bin/env bash
# cli_compare_strategies.sh -- issue 30 section 3: `plot compare-budgets text|ids|heldout ... strategies S,...` draws
# the one-shot MLA strategies (convert mla's strategy words) beside the other methods, each at kv rank = budget - the
# RoPE dims TransMLA keeps, with the session's calibration, perplexity on the same windows. On stories260K-hf:
# - the figure is written; the strategies' table has one row per strategy and kv rank (24 -> 16, 40 -> 32);
# - its model perplexity is the text's (the same windows), and its transmla row is the width table's transmla at
#   the same budget (the same conversion), to 1e-5;
# - without a calibration, or without a text, it is refused naming what to give.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-compare-strategies shared-cache
cd "$T" || exit 1
M="$ATTNLAB_MODELS/stories260K-hf"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"

run -e "load $M; calibrate $TXT seqlen 64 samples 32; plot compare-budgets heldout budgets 24,40 strategies transmla,care,mha2mla-2norm to f.png"
ok "plot compare-budgets with strategies runs" test "$(rc)" = 0
ok "  and writes the figure" is_png f.png
[ -s f.png ] && [ "$(stat -c %s f.png)" -gt 10000 ] || fail "figure too small"
# the strategies' rows: kv_rank strategy rope latent alloc kv_values ... ppl (last column)
rows=$(awk '$1 ~ /^(16|32)$/ && $2 ~ /^(transmla|care|mha2mla-2norm)$/ && NF == 13 { printf "%s:%s:%s ", $1, $2, $6 }' out.txt)
[ "$rows" = "16:transmla:24 16:care:24 16:mha2mla-2norm:24 32:transmla:40 32:care:40 32:mha2mla-2norm:40 " ] \
    || fail "strategies rows: [$rows] [$(cat out.txt)]"
for b in 24 40; do
    w=$(awk -v b=$b '$1 == b && $2 == "transmla" && NF == 4 { print $4 }' out.txt)
    s=$(awk -v r=$((b - 8)) '$1 == r && $2 == "transmla" && NF == 13 { print $13 }' out.txt)
    [ -n "$w" ] && [ -n "$s" ] && near "$s" "$w" 1e-5 || fail "budget $b: width transmla ppl [$w], strategy transmla [$s]"
done
m=$(awk '$1 == 24 && $2 == "model" && NF == 4 { print $4 }' out.txt)
ms=$(sed -n 's/^one-shot MLA strategies .*(model \([0-9.e+-]*\)).*/\1/p' out.txt)
[ -n "$m" ] && [ -n "$ms" ] && near "$ms" "$m" 1e-5 || fail "model ppl: text [$m], strategies [$ms]"
ok "the figure's caption names the strategies" grep -q "the figure draws them beside the model and the width methods" out.txt

run -e "load $M; plot compare-budgets text $TXT seqlen 64 budgets 24 strategies care to g.png"
ok "without a calibration: refused" test "$(rc)" = 1
ok "  naming calibrate" grep -q "need the session's calibration of .* with its attention inputs: run calibrate FILE first" err.txt
run -e "load $M; calibrate $TXT seqlen 64 samples 8; plot compare-budgets budgets 24 strategies care to g.png"
ok "without a text: refused" test "$(rc)" = 1
ok "  naming text FILE" grep -q "strategies draws perplexity: give it with text FILE" err.txt
run -e "load $M; calibrate $TXT seqlen 64 samples 8 inputs off; plot compare-budgets heldout budgets 24 strategies care to g.png"
ok "a calibration without attention inputs: refused naming calibrate" grep -q "need the session's calibration of .* with its attention inputs" err.txt
cli_done
