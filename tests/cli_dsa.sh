#!/bin/bash
# cli_dsa.sh -- DeepSeek-V3.2 (deepseek_v32) and GLM-5 (glm_moe_dsa) through `attnlab -e`: MLA with a
# lightning indexer that picks index_topk keys per query (the recipes' index_topk 8). `info` shows
# the indexer (index_topk, its heads, its weights) and GLM-5's interleaved RoPE; `ranks vo` finds the
# planted ranks; `ppl` says whether the windows stayed within index_topk (dense) or the selection ran,
# and the two give the numbers test_families checks against the float64 reference; a transformed
# layer (truncate) runs dense, so its ppl past index_topk is refused; `kv-cache` names the indexer's
# keys; a config whose index_head_dim disagrees with the tensors is refused by load and named by lint.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-dsa
cd "$T" || exit 1
cli_ids 40 ids.txt

for fam in deepseek_v32 glm_moe_dsa; do
    d=$T/$fam
    run -e "synth family $fam $d"
    ok "synth family $fam runs" test "$(rc)" = 0
    ok "  config.json names index_topk 8" grep -Eq '"index_topk":[[:space:]]*8' "$d/config.json"
    ok "  the indexer's tensors carry the real names" grep -q 'model.layers.2.self_attn.indexer.weights_proj.weight' \
        "$d/model.safetensors"

    run -e "load $d; info"
    ok "$fam: info runs" test "$(rc)" = 0
    info=$(cat out.txt)
    has "$info" "^family  *$fam$" || fail "$fam info: family [$info]"
    has "$info" "^index_topk  *8$" || fail "$fam info: index_topk [$info]"
    has "$info" "^index_n_heads  *4$" || fail "$fam info: index_n_heads [$info]"
    has "$info" "^index_head_dim  *32$" || fail "$fam info: index_head_dim [$info]"
    has "$info" "^indexer_weights  *self_attn.indexer.wq_b \[128, 64\], self_attn.indexer.wk \[32, 128\], self_attn.indexer.k_norm \[32\] + bias, self_attn.indexer.weights_proj \[4, 128\]: 12864 weights" \
        || fail "$fam info: the indexer's weights [$info]"
    has "$info" "^indexer  *positions below 8 attend to every earlier key" || fail "$fam info: what the indexer does [$info]"
    has "$info" "^ranks vo  *yes$" || fail "$fam info: ranks vo [$info]"
    has "$info" "^ppl/calibrate  *yes: with the lightning indexer's selection of 8 keys per query from position 8" \
        || fail "$fam info: ppl's note [$info]"

    run -e "load $d; ranks vo layer 1"
    grep -Eq "^ +1 +0 +6 +32 +6$" out.txt || fail "$fam: layer 1 head 0 not 6 / 32 / 6: [$(cat out.txt)]"

    run -e "load $d; kv-cache"
    ok "$fam: kv-cache names the indexer's keys" grep -q "indexer caches 32 more values per token per layer" out.txt
done
has "$(e "load $T/deepseek_v32; info")" "^rope_layout  *interleaved$" || fail "deepseek_v32: MLA RoPE interleaved"
has "$(e "load $T/glm_moe_dsa; info")" "^rope_layout  *interleaved$" || fail "glm_moe_dsa: MLA RoPE interleaved"
has "$(e "load $T/glm_moe_dsa; info")" "^indexer_shared_layers  *1$" || fail "glm_moe_dsa: layer 1 shares layer 0's selection"
hasnt "$(e "load $T/deepseek_v32; info")" "^indexer_shared_layers" || fail "deepseek_v32: no shared layers"

# ppl: windows of 8 stay within index_topk (dense); one window of 40 runs the selection from position 8
d=$T/deepseek_v32
run -e "load $d; ppl ids ids.txt seqlen 8"
ok "ppl seqlen 8 runs" test "$(rc)" = 0
ok "  says dense" grep -q "indexer: windows of at most 8 tokens <= index_topk 8: dense attention" err.txt
awk '$1 == 35 { ok = ($2 > 6.2644 && $2 < 6.2645) } END { exit !ok }' out.txt || fail "ppl seqlen 8: NLL not 6.26442 [$(cat out.txt)]"
run -e "load $d; ppl ids ids.txt seqlen 40"
ok "ppl seqlen 40 runs" test "$(rc)" = 0
ok "  says the selection ran" grep -q "positions 8.. attend to the indexer's 8 selected keys" err.txt
awk '$1 == 39 { ok = ($2 > 6.1328 && $2 < 6.1330) } END { exit !ok }' out.txt || fail "ppl seqlen 40: NLL not 6.13289 [$(cat out.txt)]"

run -e "load $d; truncate vo rank 4; ppl ids ids.txt seqlen 8"
ok "truncate, then ppl within index_topk runs" test "$(rc)" = 0
run -e "load $d; truncate vo rank 4; ppl ids ids.txt seqlen 40"
ok "truncate, then ppl past index_topk is refused" test "$(rc)" = 1
ok "  naming index_topk" grep -q "pass index_topk 8, where the indexer selects keys" err.txt
ok "  and the way out" grep -q "or export it (\`export DIR\`) and load DIR" err.txt
run -e "load $d; truncate vo rank 4; export $T/trunc; load $T/trunc; ppl ids ids.txt seqlen 40"
ok "the exported truncation runs past index_topk" test "$(rc)" = 0
ok "  with the selection" grep -q "positions 8.. attend to the indexer's 8 selected keys" err.txt

# kvsvd eval recomputes dense attention: refused on windows past index_topk, runs within it
cli_ids 400 ids400.txt
run -e "load $d; calibrate ids ids400.txt seqlen 32; kvsvd learn all rank 8; kvsvd eval"
ok "kvsvd eval on 32-token windows is refused" test "$(rc)" = 1
ok "  naming the indexer" grep -q "lightning indexer selects 8 keys per query from position 8 on, and these windows have 32 tokens" err.txt
run -e "load $d; calibrate ids ids400.txt seqlen 8; kvsvd learn all rank 8; kvsvd eval"
ok "kvsvd eval on 8-token windows runs" test "$(rc)" = 0
ok "  reproducing the forward pass's attention" bash -c "! grep -q 'recomputed attention differs' err.txt"

# index_head_dim 16 in config.json, 32 in the tensors: load refuses, lint names the tensor
cp -r "$d" "$T/bad"
sed -i -E 's/"index_head_dim":[[:space:]]*32/"index_head_dim": 16/' "$T/bad/config.json"
run -e "load $T/bad"
ok "load refuses the indexer's shape" test "$(rc)" = 1
ok "  naming wq_b" grep -q "self_attn.indexer.wq_b.weight' has shape \[128, 64\]" err.txt
run -e "lint $T/bad"
ok "  lint names it" grep -q "indexer.wq_b.weight is \[128, 64\]; config.json says \[64, 64\]" out.txt
cli_done
