#!/usr/bin/env bash
# cli_kv_row_exact.sh (nur's cli_nur_kv_row.sh) -- (nur's review, trust: one KV-bytes answer) `truncate vo tau 0.99` on demo-llama
# (4 layers, BF16 cache) says "128 -> 107.5 values ... whole model 1024 -> 860 bytes per token"; kv-cache's
# row for it names 107.5 and 860 in its scheme text but its columns (and the CSV) hold the rounded
# 108 values and 216 bytes per token per layer, i.e. 864 bytes over the 4 layers, not 860
# (commands/cmd_farr.c farr_xf_kv_row: row->values = llround(now), the bytes then from the rounded values).
# Decision: kv-cache's values column holds the exact mean (107.5; tables print 6 significant digits) and
# its bytes come from it (215); truncate's line prints the mean the same way (%.6g: 104.25, not %.4g's 104.2).
# FAILS on cb14092.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-nur-kv-row shared-cache
cd "$T" || exit 1
out=$(e "load demo-llama; truncate vo tau 0.99; kv-cache to kv.csv")
ok "truncate says 860 bytes per token" has "$out" "whole model 1024 -> 860 bytes per token"
row=$(grep '^"truncate' kv.csv)
ok "kv-cache has the truncate row ($row)" test -n "$row"
b=$(awk -F, '{print $(NF-1)}' <<<"$row")
ok "its bytes per token per layer x 4 layers = truncate's 860 (got $b x 4)" \
    python3 -c "import sys; sys.exit(abs(float(sys.argv[1]) * 4 - 860) > 1e-9)" "${b:-0}"
v=$(awk -F, '{print $(NF-2)}' <<<"$row")
ok "its values per token per layer: the exact mean 107.5 (got $v)" test "$v" = 107.5
out=$(e "load demo-llama; truncate vo tau 0.95; kv-cache to kv95.csv")
ok "tau 0.95: truncate prints the mean 104.25 (not %.4g's 104.2)" has "$out" "128 -> 104.25 values"
ok "  and 834 bytes for the whole model" has "$out" "whole model 1024 -> 834 bytes per token"
row=$(grep '^"truncate' kv95.csv)
ok "  kv-cache's row: 104.25 values, 208.5 bytes per layer ($row)" \
    test "$(awk -F, '{print $(NF-2) " " $(NF-1)}' <<<"$row")" = "104.25 208.5"
ok "  its scheme text says 104.25 and 834 bytes" has "$row" "128 -> 104.25, mean over 4 layers; 834 bytes per token"
cli_done
