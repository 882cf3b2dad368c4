#!/bin/bash
# cli_minimax_m2.sh -- the minimax_m2 family (MiniMax-M2) through `attnlab -e`: `synth family
# minimax_m2` writes its tiny checkpoint (rotary_dim 16 of 32, q/k norms over the projection, 8
# experts w1/w3/w2 per layer under block_sparse_moe with its e_score_correction_bias); `info`,
# `ranks vo`, `ppl` (the NLL test_families checks against the float64 reference). Switched off, each
# feature changes the NLL: rotary_dim dropped (every dim rotates), and the routing bias zeroed
# (the choice of experts is the sigmoid's alone).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-minimax-m2
cd "$T" || exit 1
d=$T/mm
cli_ids 40 ids.txt
nll() { awk '$1 == 39 {print $2}' out.txt; }

run -e "synth family minimax_m2 $d"
ok "synth family minimax_m2 runs" test "$(rc)" = 0

run -e "load $d; info"
ok "info runs" test "$(rc)" = 0
info=$(cat out.txt)
has "$info" "^family  *minimax_m2$" || fail "info: family [$info]"
has "$info" "^rotary_dims  *16$" || fail "info: rotary_dim 16 [$info]"
has "$info" "^qk_norm  *whole projection$" || fail "info: q/k norm over the projection [$info]"
has "$info" "^routed_experts  *8$" || fail "info: 8 experts [$info]"
has "$info" "^ranks qk  *no: .*whole projection" || fail "info: ranks qk refused for the q/k norm [$info]"

run -e "load $d; ranks vo"
for h in 0 1; do grep -Eq "^ +1 +$h +6 +32 +6$" out.txt || fail "layer 1 head $h not 6 / 32 / 6: [$(cat out.txt)]"; done
grep -Eq "^ +2 +3 +31 +31 +4$" out.txt || fail "layer 2 head 3 not 31 / 31 / 4: [$(cat out.txt)]"

run -e "load $d; ppl ids ids.txt seqlen 40"
ok "ppl runs" test "$(rc)" = 0
base=$(nll)
ok "  NLL 6.0382 ($base)" test "$base" = 6.0382

cp -r "$d" "$T/full"
sed -i -E 's/"rotary_dim":[[:space:]]*16,?//' "$T/full/config.json"
run -e "load $T/full; info"
has "$(cat out.txt)" "^rotary_dims  *32$" || fail "without rotary_dim: 32 rotary dims [$(cat out.txt)]"
run -e "load $T/full; ppl ids ids.txt seqlen 40"
ok "without rotary_dim the NLL changes ($(nll))" test -n "$(nll)" -a "$(nll)" != "$base"

cp -r "$d" "$T/nobias"
python3 - "$T/nobias/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
for name, v in json.loads(b[8:8 + n]).items():
    if name.endswith('block_sparse_moe.e_score_correction_bias'):
        s, e = v['data_offsets']
        b[8 + n + s:8 + n + e] = bytes(e - s)
open(p, 'wb').write(b)
PY
run -e "load $T/nobias; ppl ids ids.txt seqlen 40"
ok "with the routing bias zeroed the NLL changes ($(nll))" test -n "$(nll)" -a "$(nll)" != "$base"
cli_done
