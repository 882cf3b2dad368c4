#!/usr/bin/env bash
# cli_tsb_budget.sh -- trust (helper tsb): one question, one answer for `compare kv-budget B ids FILE` (width against
# length, core/methods/budget_text.c) in compute bf16. Its width rows run as their dense export runs (budget_run.c:
# the source's shapes, a stock of the rewritten projections in BF16): the farr row at r_v 16 is `truncate vo rank 16`'s
# `ppl`, the tpa rows `convert tpa`'s, and a width method that rewrites nothing (full rank, every KV head) under
# StreamingLLM is the streaming-llm row. Old binary, bf16: farr 344.642 (truncate 344.589), tpa-a 359.463 (convert
# tpa 359.277), tpa-b 359.819 (359.908), farr / tpa-a / mean-pool + streaming-llm at full rank 347.892 (streaming-llm
# 347.971). f32 mode is pinned unchanged.
# The numbers pinned here are bf16 mode's on the vdpbf16ps token lanes (ATTNLAB_AMX=0), the same on every AVX-512
# BF16 CPU: the AMX tiles (matmul_amx.h) sum the same products in another order, and bf16 mode's roundings of the
# activations carry that on (the NLLs move in their last digits there); cli_bf16_hold / cli_check_session / cli_convert_lanes check the one-number rules
# on the AMX tiles.
export ATTNLAB_AMX=0
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-tsb-budget shared-cache
cd "$T" || exit 1
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
PPL="ppl ids ids.txt seqlen 32"
CMP="compare kv-budget 96 ids ids.txt seqlen 32"
col() { grep "^$1," "$2" | awk -F, '{ print $(NF - 1) }'; }        # a row's ppl (9 digits)
pplv() { sed -n 2p "$1" | cut -d, -f3; }                          # ppl's

# ---- compute bf16: the width rows are the commands' numbers
run -e "load demo-llama-bf16 as d; set compute bf16; $CMP to c.csv; truncate vo rank 16; $PPL to t.csv; convert tpa k-rank 2 v-rank 1 form a ppl off; $PPL to a.csv; convert tpa k-rank 24 v-rank 24 form b ppl off; $PPL to b.csv"
[ "$(rc)" = 0 ] || fail "rc $(rc) [$(cat err.txt)]"
ok "bf16 farr (r_v 16) is truncate vo rank 16's ppl ($(col farr c.csv) / $(pplv t.csv); was 344.642)" \
   [ "$(col farr c.csv)" = "$(pplv t.csv)" ]
ok "  344.588963" [ "$(pplv t.csv)" = "344.588963" ]
ok "bf16 tpa-a (R_K 2, R_V 1) is convert tpa form a's ($(col tpa-a c.csv) / $(pplv a.csv); was 359.463)" \
   [ "$(col tpa-a c.csv)" = "$(pplv a.csv)" ]
ok "bf16 tpa-b (R_K 24, R_V 24) is convert tpa form b's ($(col tpa-b c.csv) / $(pplv b.csv); was 359.819)" \
   [ "$(col tpa-b c.csv)" = "$(pplv b.csv)" ]
S=$(col streaming-llm c.csv)
ok "bf16 farr at full rank + streaming-llm is the streaming-llm row ($(col farr+streaming-llm c.csv) / $S; was 347.892)" \
   [ "$(col farr+streaming-llm c.csv)" = "$S" ]
ok "  tpa-a at full rank" [ "$(col tpa-a+streaming-llm c.csv)" = "$S" ]
ok "  mean-pool with every KV head" [ "$(col mean-pool+streaming-llm c.csv)" = "$S" ]
ok "  the streaming-llm row itself unchanged (347.971286)" [ "$S" = "347.971286" ]

# ---- compute f32: unchanged (the old binary's rows, digit for digit)
run -e "load demo-llama-bf16 as d; $CMP to c32.csv"
[ "$(rc)" = 0 ] || fail "rc $(rc) [$(cat err.txt)]"
ok "f32 pinned: model" [ "$(col model c32.csv)" = "347.769034" ]
ok "  farr" [ "$(col farr c32.csv)" = "344.630785" ]
ok "  transmla" [ "$(col transmla c32.csv)" = "363.795684" ]
ok "  tpa-a" [ "$(col tpa-a c32.csv)" = "359.315937" ]
ok "  tpa-b" [ "$(col tpa-b c32.csv)" = "359.910761" ]
ok "  mean-pool" [ "$(col mean-pool c32.csv)" = "376.055667" ]
ok "  farr+streaming-llm" [ "$(col farr+streaming-llm c32.csv)" = "348.015254" ]
ok "  mean-pool+streaming-llm" [ "$(col mean-pool+streaming-llm c32.csv)" = "348.015254" ]

cli_done
