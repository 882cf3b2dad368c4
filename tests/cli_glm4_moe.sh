#!/bin/bash
# cli_glm4_moe.sh -- the glm4_moe family (GLM-4.5 / 4.6 / 4.7) through `attnlab -e`: `synth family
# glm4_moe` writes its tiny checkpoint (q/k/v biases, per-head q/k norms, partial rotary 0.5, layer
# 0 dense then DeepSeek-V3-routed experts), `info` says per analysis what runs and why not, `ranks
# vo` / `spectrum` find the planted ranks, `ranks qk` is refused for the q/k norm, `ppl` runs. The
# same checkpoint with use_qk_norm false (GLM-4.5-Air's setting) ignores its q_norm / k_norm tensors
# as transformers does (lint flags them) and then allows `ranks qk` on the NoPE half of each head and
# `convert mla`, whose export is refused for the MoE MLPs (the message does not blame the router,
# which is DeepSeek-V3's own).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-glm4-moe
cd "$T" || exit 1
d=$T/glm
cli_ids 40 ids.txt

run -e "synth family glm4_moe $d"
ok "synth family glm4_moe runs" test "$(rc)" = 0
ok "  config.json names glm4_moe" grep -Eq '"model_type":[[:space:]]*"glm4_moe"' "$d/config.json"
ok "  and use_qk_norm true" grep -Eq '"use_qk_norm":[[:space:]]*true' "$d/config.json"

run -e "load $d; info"
ok "info runs" test "$(rc)" = 0
info=$(cat out.txt)
has "$info" "^family  *glm4_moe$" || fail "info: family [$info]"
has "$info" "^rotary_dims  *16$" || fail "info: partial rotary 0.5 of 32 dims [$info]"
has "$info" "^qkv_bias  *true$" || fail "info: qkv_bias [$info]"
has "$info" "^qk_norm  *per head$" || fail "info: qk_norm per head (use_qk_norm) [$info]"
has "$info" "^mlp  *moe$" || fail "info: mlp moe [$info]"
has "$info" "^routed_experts  *8$" || fail "info: 8 experts [$info]"
has "$info" "^ranks vo  *yes$" || fail "info: ranks vo yes [$info]"
has "$info" "^ranks qk  *no: .*per-head Q/K RMSNorm" || fail "info: ranks qk refused for the q/k norm [$info]"
has "$info" "^ppl/calibrate  *yes$" || fail "info: ppl yes [$info]"
has "$info" "^convert mla  *yes: with qk-norm fold|drop|keep only: the per-head Q/K RMSNorm" || fail "info: convert mla with qk-norm fold|drop for the q/k norm [$info]"

run -e "load $d; ranks vo"
ok "ranks vo runs" test "$(rc)" = 0
# layer 1, KV head 0 (query heads 0 and 1): V 6, O 32, VO 6; KV head 1 flat; layer 2: VO 4
for h in 0 1; do grep -Eq "^ +1 +$h +6 +32 +6$" out.txt || fail "layer 1 head $h not 6 / 32 / 6: [$(cat out.txt)]"; done
for h in 2 3; do grep -Eq "^ +1 +$h +32 +32 +32$" out.txt || fail "layer 1 head $h not flat: [$(cat out.txt)]"; done
grep -Eq "^ +2 +3 +31 +31 +4$" out.txt || fail "layer 2 head 3 not 31 / 31 / 4: [$(cat out.txt)]"

run -e "load $d; spectrum vo layer 1 head 0"
ok "spectrum runs" test "$(rc)" = 0
ok "  effective rank 6" grep -q "effective rank 6 at tau 0.99, 6 at tau 0.999" out.txt

run -e "load $d; ranks qk layer 1"
ok "ranks qk refused" test "$(rc)" = 1
ok "  naming the q/k norm" grep -q "per-head Q/K RMSNorm" err.txt

run -e "load $d; ppl ids ids.txt seqlen 40"
ok "ppl runs" test "$(rc)" = 0
awk '$1 == 39 { ok = ($2 > 6.19 && $2 < 6.22) } END { exit !ok }' out.txt || fail "ppl: NLL not 6.2028 [$(cat out.txt)]"

# GLM-4.5-Air's setting: use_qk_norm false; the q/k norm tensors are then not read
cp -r "$d" "$T/air"
sed -i -E 's/"use_qk_norm":[[:space:]]*true/"use_qk_norm": false/' "$T/air/config.json"
run -e "load $T/air; info"
has "$(cat out.txt)" "^qk_norm  *none$" || fail "air: qk_norm none [$(cat out.txt)]"
run -e "load $T/air; ranks qk layer 1"
ok "air: ranks qk runs" test "$(rc)" = 0
ok "  on the NoPE dims 16-31" grep -q "NoPE dims 16-31" out.txt
run -e "load $T/air; ppl ids ids.txt seqlen 40"
awk '$1 == 39 { ok = ($2 > 1 && $2 < 20 && ($2 < 6.19 || $2 > 6.22)) } END { exit !ok }' out.txt ||
    fail "air: ppl without the q/k norms [$(cat out.txt)]"
run -e "load $T/air; convert mla kv-rank 64; export $T/air-mla"
ok "air: convert mla runs, its export is refused" test "$(rc)" = 1
ok "  the conversion ran" grep -q "converted layers 0-2" out.txt
ok "  the refusal names the MoE MLPs, not the router (it is DeepSeek-V3's)" grep -q "(DeepSeek-V3's routing).*copies no experts" err.txt
ok "  nothing written" test ! -e "$T/air-mla/model.safetensors"
run -e "lint $T/air"
ok "air: lint names the unread q_norm" grep -q "self_attn.q_norm" out.txt
cli_done
