#!/usr/bin/env bash
# cli_tsb_study.sh -- trust (helper tsb): one question, one answer for TransMLA's Fig. 4b table (`convert mla-table
# kv-ranks R`, core/methods/tmla_study.c). Each row is `convert mla kv-rank R [stats weights] [balance off]`'s
# conversion run as `ppl` runs it (mla_run_for): in compute bf16 its BF16 DeepSeek-V3 export as read back, so a row's
# nll / ppl is that command's `ppl` in the same session and mode, and `check DIR` of its export. Old binary, bf16:
# rows 362.682 / 353.251 / 391.974 / 380.671 (float32 layers) against convert's 363.046 / 353.341 / 391.941 / 380.794.
# f32 mode is pinned unchanged (the old rows, which already were convert's).
# The numbers pinned here are bf16 mode's on the vdpbf16ps token lanes (ATTNLAB_AMX=0), the same on every AVX-512
# BF16 CPU: the AMX tiles (matmul_amx.h) sum the same products in another order, and bf16 mode's roundings of the
# activations carry that on (380.683 there, as in cli_bf16_hold); cli_bf16_hold / cli_check_session / cli_convert_lanes check the one-number rules
# on the AMX tiles.
export ATTNLAB_AMX=0
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-tsb-study shared-cache
cd "$T" || exit 1
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
cut -d' ' -f257-300 ids.txt > valid.txt
CAL="calibrate ids ids.txt samples 4 seqlen 32"
PPL="ppl ids valid.txt seqlen 32"
row() { grep "^16,$1,$2," "$3" | cut -d, -f7,8; }          # a table row's nll,ppl (9 digits)
pplv() { sed -n 2p "$1" | cut -d, -f2,3; }                 # ppl's nll,ppl

# ---- compute bf16: every row is its convert mla's ppl
run -e "load demo-llama-bf16 as d; set compute bf16; $CAL; convert mla-table kv-ranks 16 to t.csv; convert mla kv-rank 16 ppl off; $PPL to wx-on.csv; export e; check e; convert mla kv-rank 16 balance off ppl off; $PPL to wx-off.csv; convert mla kv-rank 16 stats weights ppl off; $PPL to w-on.csv; convert mla kv-rank 16 stats weights balance off ppl off; $PPL to w-off.csv"
[ "$(rc)" = 0 ] || fail "rc $(rc) [$(cat err.txt)]"
ok "bf16 WX on: the row is convert mla's ppl ($(row WX on t.csv) / $(pplv wx-on.csv); was 380.671)" \
   [ "$(row WX on t.csv)" = "$(pplv wx-on.csv)" ]
ok "  and 5.94225899,380.794168" [ "$(pplv wx-on.csv)" = "5.94225899,380.794168" ]
ok "  check DIR of its export: 380.794" grep -q "^perplexity on 42 tokens, held out.* 380\.794 after" out.txt
ok "bf16 WX off (balance off): the row is convert's ($(row WX off t.csv) / $(pplv wx-off.csv); was 391.974)" \
   [ "$(row WX off t.csv)" = "$(pplv wx-off.csv)" ]
ok "bf16 W on (stats weights): the row is convert's ($(row W on t.csv) / $(pplv w-on.csv); was 353.251)" \
   [ "$(row W on t.csv)" = "$(pplv w-on.csv)" ]
ok "bf16 W off: the row is convert's ($(row W off t.csv) / $(pplv w-off.csv); was 362.682)" \
   [ "$(row W off t.csv)" = "$(pplv w-off.csv)" ]

# ---- compute f32: unchanged (the old binary's rows, digit for digit)
run -e "load demo-llama-bf16 as d; $CAL; convert mla-table kv-ranks 16 to t32.csv"
[ "$(rc)" = 0 ] || fail "rc $(rc) [$(cat err.txt)]"
ok "f32 rows pinned: W off" [ "$(row W off t32.csv)" = "5.89358541,362.703395" ]
ok "  W on" [ "$(row W on t32.csv)" = "5.86766975,353.424453" ]
ok "  WX off" [ "$(row WX off t32.csv)" = "5.97169204,392.168673" ]
ok "  WX on (convert mla's f32 380.784, cli_mla_check_dtype)" [ "$(row WX on t32.csv)" = "5.94223321,380.784353" ]
ok "  the energy columns as before" grep -q "^16,WX,on,0.65117475,0.566687891,0.680575662," t32.csv

cli_done
