#!/usr/bin/env bash
# cli_compare_na.sh -- `compare kv-budget` on models whose attention some methods do not carry runs the rows that
# are valid and marks the others "not applicable: <why>" (it refused the whole model):
#   qwen3 (Q/K RMSNorm per head): FaRR (keys whole under RoPE), mean-pool and KQ-SVD (its projections of the normed
#     keys) are exact at the model's own budget (out_err 0: the norm is computed on both sides), TransMLA runs with
#     the norm folded and says so, TPA is not applicable naming the norm;
#   qwen3_next (Qwen3.5's output gate, and Q/K norms): mean-pool exact at the full budget (the gate passes: query
#     heads stay), TransMLA runs (its latent keeps the head outputs, the gate kept), FaRR, KQ-SVD and TPA not
#     applicable naming the gate; on a text, the model row and the three evictions (StreamingLLM, H2O, SnapKV, key
#     masks of the forward pass, which computes the gate) give perplexities, the evictions not the model's;
#   an MLA model is still refused (the forward pass's eviction does not run on MLA layers: no row could).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-compare-na shared-cache
cd "$T" || exit 1
e "synth family qwen3 q3; synth family qwen3_next qn; synth family deepseek_v3 ds" >/dev/null
seq 1 300 | awk '{ printf "%d ", ($1 * 37) % 200 + 1 }' >t.ids

# col FILE METHOD LAYER FIELD: a field of compare's CSV (quoted settings hold commas)
col() { python3 -c "
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r['method'] == sys.argv[2] and r.get('layer', sys.argv[3]) == sys.argv[3]: print(r[sys.argv[4]]); break
" "$@"; }

run -e "load q3; compare kv-budget 128 layers 0 to q.csv; compare kv-budget 32 to q32.csv"
ok "qwen3: compare runs (rc $(rc): $(head -c 300 err.txt))" test "$(rc)" = 0
ok "qwen3 full budget: farr exact [$(col q.csv farr 0 out_err)]" test "$(col q.csv farr 0 out_err)" = 0
ok "qwen3 full budget: mean-pool exact [$(col q.csv mean-pool 0 out_err)]" test "$(col q.csv mean-pool 0 out_err)" = 0
ok "qwen3: transmla folds the norm [$(col q32.csv transmla 1 setting)]" has "$(col q32.csv transmla 1 setting)" "Q/K norm folded"
ok "qwen3: transmla has an error [$(col q32.csv transmla 1 out_err)]" \
    python3 -c "import sys; v = float(sys.argv[1]); sys.exit(not 0 < v < 1)" "$(col q32.csv transmla 1 out_err)"
ok "qwen3 full budget: kqsvd exact on the normed keys [$(col q.csv kqsvd 0 out_err)]" \
    python3 -c "import sys; sys.exit(not float(sys.argv[1]) < 1e-6)" "$(col q.csv kqsvd 0 out_err)"
ok "qwen3: kqsvd at 32 values [$(col q32.csv kqsvd 1 kv_values)]" test "$(col q32.csv kqsvd 1 kv_values)" = 32
for k in tpa-a tpa-b; do
    ok "qwen3: $k not applicable [$(col q.csv $k 0 setting)]" has "$(col q.csv $k 0 setting)" "^not applicable: the Q/K RMSNorm"
done

run -e "load qn; compare kv-budget 128 to g.csv"
ok "qwen3_next: compare runs (rc $(rc): $(head -c 300 err.txt))" test "$(rc)" = 0
ok "qwen3_next full budget: mean-pool exact through the gate [$(col g.csv mean-pool 3 out_err)]" test "$(col g.csv mean-pool 3 out_err)" = 0
ok "qwen3_next: transmla runs [$(col g.csv transmla 3 kv_values)]" test "$(col g.csv transmla 3 kv_values)" = 128
for k in farr kqsvd tpa-a tpa-b; do
    ok "qwen3_next: $k not applicable [$(col g.csv $k 3 setting)]" has "$(col g.csv $k 3 setting)" "^not applicable: the output gate"
done
run -e "load qn; compare kv-budget 64 ids t.ids seqlen 64 to gt.csv"
ok "qwen3_next text: compare runs (rc $(rc): $(head -c 300 err.txt))" test "$(rc)" = 0
base=$(col gt.csv model x ppl)
for k in streaming-llm h2o snapkv; do
    p=$(col gt.csv $k x ppl)
    ok "qwen3_next text: $k perplexity [$p] beside the model's [$base]" \
        python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(not (a > 1 and b > 1 and a != b))" "$p" "$base"
done
ok "qwen3_next text: farr not applicable" has "$(col gt.csv farr x setting)" "^not applicable: the output gate"
ok "qwen3_next text: farr+streaming-llm not applicable" has "$(col gt.csv farr+streaming-llm x setting)" "^not applicable"

out=$(e "load ds; compare kv-budget 64")
ok "deepseek_v3 (MLA) still refused [$out]" has "$out" "is MLA: it already caches one shared latent"
cli_done
