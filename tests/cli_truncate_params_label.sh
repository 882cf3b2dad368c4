#!/usr/bin/env bash
# cli_truncate_params_label.sh -- (nur's review, trust) truncate's "parameters X -> Y (N% fewer)" counts the pair it cut
# (V and O for `truncate vo`, Q and K for `truncate qk`), not the attention's: on demo-llama (hidden 256, 8 heads of 32,
# 2 KV heads, 4 layers) V + O is 16384 + 65536 = 81920 a layer, 327680 in all, while kv-cache's attn_params column
# counts Q, K, V and O, so the same cut read "75% fewer" here and less there. The line now names
# the pair ("V / O parameters"); FAILS on ba4dc8e ("parameters 327,680 -> 81,920").
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-truncate-params-label shared-cache
cd "$T" || exit 1
v=$(e "load demo-llama; truncate vo rank 8" | grep "^truncated VO")
ok "truncate vo names V / O: $v" has "$v" "ranks 8, V / O parameters 327,680 -> 81,920 (75.0% fewer)$"
q=$(e "load demo-r1; truncate qk rank 4" | grep "^truncated QK")
ok "truncate qk names Q / K: $q" has "$q" ", Q / K parameters [0-9,]* -> [0-9,]* ([0-9.]*% fewer)$"
cli_done
