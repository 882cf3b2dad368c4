#!/bin/bash
# cli_ministral3.sh -- the ministral3 family (Ministral 3's text model) through `attnlab -e`: `synth
# family ministral3` writes its tiny checkpoint (rope_parameters: YaRN x64 from 8 positions, theta
# 1e6, mscale = mscale_all_dim = 1, llama_4_scaling_beta 0.1); `info` shows YaRN and the q scaling;
# `ranks vo` finds the planted ranks; `ppl` gives the NLL test_families checks against the float64
# reference; the conversions and compare, whose evaluator does not scale q, are refused. Switched off --
# llama_4_scaling_beta 0 -- the q scaling is gone, the NLL changes and convert mla runs.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-ministral3
cd "$T" || exit 1
d=$T/m3
cli_ids 40 ids.txt
nll() { awk '$1 == 39 {print $2}' out.txt; }

run -e "synth family ministral3 $d"
ok "synth family ministral3 runs" test "$(rc)" = 0
ok "  config.json: rope_parameters with llama_4_scaling_beta" grep -Eq '"llama_4_scaling_beta":[[:space:]]*0.1' "$d/config.json"

run -e "load $d; info"
ok "info runs" test "$(rc)" = 0
info=$(cat out.txt)
has "$info" "^family  *ministral3$" || fail "info: family [$info]"
has "$info" "^rope_theta  *1000000$" || fail "info: rope_theta from rope_parameters [$info]"
has "$info" "^rope_scaling  *yarn$" || fail "info: YaRN from rope_parameters [$info]"
has "$info" "^q_scaling  *1 + 0.1 ln(1 + floor(p / 8))" || fail "info: q scaling [$info]"
has "$info" "^sliding_window  *0$" || fail "info: no window [$info]"
has "$info" "^convert mla  *no: .*llama_4_scaling_beta 0.1" || fail "info: convert mla refused for the q scaling [$info]"
has "$info" "^compare  *no: .*llama_4_scaling_beta" || fail "info: compare refused for the q scaling [$info]"

run -e "load $d; ranks vo"
for h in 0 1; do grep -Eq "^ +1 +$h +6 +32 +6$" out.txt || fail "layer 1 head $h not 6 / 32 / 6: [$(cat out.txt)]"; done
grep -Eq "^ +2 +3 +31 +31 +4$" out.txt || fail "layer 2 head 3 not 31 / 31 / 4: [$(cat out.txt)]"

run -e "load $d; ppl ids ids.txt seqlen 40"
ok "ppl runs" test "$(rc)" = 0
base=$(nll)
cp -r "$d" "$T/off"
sed -i -E 's/"llama_4_scaling_beta":[[:space:]]*0.1/"llama_4_scaling_beta": 0/' "$T/off/config.json"
run -e "load $T/off; info"
hasnt "$(cat out.txt)" "^q_scaling" || fail "beta 0: no q scaling [$(cat out.txt)]"
run -e "load $T/off; ppl ids ids.txt seqlen 40"
ok "without the q scaling the NLL changes ($base, $(nll))" test -n "$(nll)" -a -n "$base" -a "$(nll)" != "$base"
run -e "load $T/off; convert mla kv-rank 64"
ok "without the q scaling convert mla runs" test "$(rc)" = 0
cli_done
