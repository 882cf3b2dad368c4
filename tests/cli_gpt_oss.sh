#!/bin/bash
# cli_gpt_oss.sh -- the gpt_oss family (gpt-oss-20b / 120b) through `attnlab -e`: `synth family
# gpt_oss` writes its tiny checkpoint (sinks, q/k/v/o biases, sliding / full layers, YaRN with
# truncate false, every expert in one gate_up_proj / down_proj tensor), `info` states the sinks,
# the layer kinds, YaRN's truncate and the experts' clamped SwiGLU and says per analysis what runs,
# `ranks vo` finds the planted ranks and says what the sink does to them, `ppl` gives the
# reference's NLL (test_families checks it to 1e-4), `truncate vo` + `ppl` run with the sinks,
# `kvsvd eval` recomputes the attention with them, the conversions are refused for the windows, and
# lint reads its tensors as gpt-oss's.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-gpt-oss
cd "$T" || exit 1
d=$T/oss
cli_ids 40 ids.txt

run -e "synth family gpt_oss $d"
ok "synth family gpt_oss runs" test "$(rc)" = 0
ok "  config.json names gpt_oss" grep -Eq '"model_type":[[:space:]]*"gpt_oss"' "$d/config.json"
ok "  with YaRN's truncate false" grep -Eq '"truncate":[[:space:]]*false' "$d/config.json"

run -e "load $d; info"
ok "info runs" test "$(rc)" = 0
info=$(cat out.txt)
has "$info" "^family  *gpt_oss$" || fail "info: family [$info]"
has "$info" "^qkv_bias  *true$" || fail "info: qkv_bias [$info]"
has "$info" "^attention_sinks  *a learned logit per head" || fail "info: the sinks [$info]"
has "$info" "^sliding_layers  *0, 2 (window 8); full: 1, 3$" || fail "info: sliding / full layers [$info]"
has "$info" "^yarn_truncate  *false" || fail "info: YaRN truncate false [$info]"
has "$info" "^routed_experts  *4$" || fail "info: 4 experts [$info]"
has "$info" "^experts_per_token  *2$" || fail "info: top-2 [$info]"
has "$info" "^experts_mlp  *clamped SwiGLU over interleaved gate/up columns: (clamp(up, +-7) + 1)" ||
    fail "info: the clamped SwiGLU [$info]"
has "$info" "^ranks vo  *yes$" || fail "info: ranks vo yes [$info]"
has "$info" "^ppl/calibrate  *yes$" || fail "info: ppl yes [$info]"
has "$info" "^convert mla  *yes" || fail "info: convert mla runs with the windows and sinks [$info]"

run -e "load $d; ranks vo"
ok "ranks vo runs" test "$(rc)" = 0
for h in 0 1; do grep -Eq "^ +1 +$h +6 +32 +6$" out.txt || fail "layer 1 head $h not 6 / 32 / 6: [$(cat out.txt)]"; done
grep -Eq "^ +2 +3 +31 +31 +4$" out.txt || fail "layer 2 head 3 not 31 / 31 / 4: [$(cat out.txt)]"
ok "  says what the sink does to W_V W_O" grep -q "attention sinks: .*W_V W_O is the map the model computes" out.txt

run -e "load $d; ppl ids ids.txt seqlen 40"
ok "ppl runs" test "$(rc)" = 0
awk '$1 == 39 { ok = ($2 > 6.13 && $2 < 6.155) } END { exit !ok }' out.txt || fail "ppl: NLL not 6.1424 [$(cat out.txt)]"

run -e "load $d; truncate vo tau 0.99; ppl ids ids.txt seqlen 40"
ok "truncate vo + ppl run" test "$(rc)" = 0
awk '$1 == 39 { ok = ($2 > 1 && $2 < 20) } END { exit !ok }' out.txt || fail "truncated ppl [$(cat out.txt)]"

# kvsvd eval recomputes each layer's attention from the cached K, Q, V: with the sinks, at full rank,
# it is the forward pass's (without them it differed by 0.25 and warned)
cli_ids 400 ids400.txt
run -e "load $d; calibrate ids ids400.txt seqlen 40; kvsvd learn ksvd rank 32; kvsvd eval"
ok "calibrate + kvsvd learn + eval run" test "$(rc)" = 0
hasnt "$(cat err.txt out.txt)" "recomputed attention differs" || fail "kvsvd eval: the recomputed attention differs [$(cat err.txt)]"

run -e "load $d; convert mla kv-rank 64; export $T/oss-mla"
ok "convert mla runs, its export is refused" grep -q "converted layers 0-3" out.txt
ok "  the export names the window and the sinks" grep -q "no stock DeepSeek-V3 form for gpt_oss.s sliding window (.*attention sinks (" err.txt
# lint knows gpt_oss: the sinks, the router's bias and the fused experts are its tensors
run -e "lint $d"
ok "lint runs" grep -q "^lint .*gpt_oss" out.txt
grep -Eq "^transformers +GptOssForCausalLM +loads$" out.txt || fail "lint: transformers loads [$(cat out.txt)]"
grep -Eq "^llama.cpp +gpt-oss" out.txt || fail "lint: llama.cpp's gpt-oss [$(cat out.txt)]"
hasnt "$(cat out.txt)" "no tensors of gpt_oss" || fail "lint: gpt_oss's own tensors called foreign [$(cat out.txt)]"
hasnt "$(cat out.txt)" "not among the families lint knows" || fail "lint: gpt_oss unknown [$(cat out.txt)]"
cli_done
