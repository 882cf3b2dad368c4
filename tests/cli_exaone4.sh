#!/bin/bash
# cli_exaone4.sh -- the exaone4 family (EXAONE 4.0) through `attnlab -e`: `synth family exaone4`
# writes its tiny checkpoint (layer_types 3 sliding : 1 full, sliding_window_pattern "LLLG", per-head
# q/k norms, post-norms, llama3 RoPE); `info` names the layer without RoPE (the full layer 3) and
# says `ranks qk` is refused for the q/k norm; `ranks vo` finds the planted ranks; `ppl` gives the
# NLL test_families checks against the float64 reference. Switched off -- the same weights with
# sliding_window null, EXAONE 4.0-1.2B's setting, where every layer rotates and none slides -- the
# NoPE layer is gone and the NLL changes.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-exaone4
cd "$T" || exit 1
d=$T/ex
cli_ids 40 ids.txt

run -e "synth family exaone4 $d"
ok "synth family exaone4 runs" test "$(rc)" = 0
ok "  config.json: sliding_window_pattern LLLG" grep -Eq '"sliding_window_pattern":[[:space:]]*"LLLG"' "$d/config.json"

run -e "load $d; info"
ok "info runs" test "$(rc)" = 0
info=$(cat out.txt)
has "$info" "^family  *exaone4$" || fail "info: family [$info]"
has "$info" "^nope_layers  *3$" || fail "info: layer 3 without RoPE [$info]"
has "$info" "^sliding_window  *8$" || fail "info: window 8 [$info]"
has "$info" "^qk_norm  *per head$" || fail "info: per-head q/k norms [$info]"
has "$info" "^rope_scaling  *llama3$" || fail "info: llama3 RoPE [$info]"
has "$info" "^ranks qk  *no: .*per-head Q/K RMSNorm" || fail "info: ranks qk refused for the q/k norm [$info]"

run -e "load $d; ranks vo"
ok "ranks vo runs" test "$(rc)" = 0
for h in 0 1; do grep -Eq "^ +1 +$h +6 +32 +6$" out.txt || fail "layer 1 head $h not 6 / 32 / 6: [$(cat out.txt)]"; done
grep -Eq "^ +2 +3 +31 +31 +4$" out.txt || fail "layer 2 head 3 not 31 / 31 / 4: [$(cat out.txt)]"

run -e "load $d; ppl ids ids.txt seqlen 40"
ok "ppl runs" test "$(rc)" = 0
awk '$1 == 39 { ok = ($2 > 6.062 && $2 < 6.065) } END { exit !ok }' out.txt || fail "ppl: NLL not 6.0633 [$(cat out.txt)]"

# sliding_window null (the 1.2B's setting): no window, RoPE on every layer
cp -r "$d" "$T/dense"
sed -i -E 's/"sliding_window":[[:space:]]*8/"sliding_window": null/' "$T/dense/config.json"
run -e "load $T/dense; info"
hasnt "$(cat out.txt)" "^nope_layers  *[0-9]" || fail "dense: no NoPE layers [$(cat out.txt)]"
has "$(cat out.txt)" "^sliding_window  *0$" || fail "dense: no window [$(cat out.txt)]"
run -e "load $T/dense; ppl ids ids.txt seqlen 40"
awk '$1 == 39 { ok = ($2 > 6.062 && $2 < 6.065) } END { exit ok }' out.txt || fail "dense: the NLL did not change [$(cat out.txt)]"
cli_done
