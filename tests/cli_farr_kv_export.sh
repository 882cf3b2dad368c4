#!/usr/bin/env bash
# cli_farr_kv_export.sh (nur's cli_nur_farr_kv_export.sh) -- (nur's review, trust: one KV-bytes answer) `truncate vo rank 8 policy model-max`
# on demo-llama (GQA) says "KV cache ... whole model 1024 -> 640 bytes per token" (and kv-cache's truncate row
# 640), but both exports it can write keep the source's shapes -- `format dense` (the source's names and
# shapes) and `format factors` (zero-padded heads) -- and `info` of either reloaded says kv_bytes_per_token
# 1024, as a stock engine caches it (v_proj still [256, 64]). Nothing tells the researcher that the 640 is a
# cache no written checkpoint has. Asserted: either the export's info agrees with truncate's line, or
# truncate's KV line says what its exports cache (names `dense`). FAILS on cb14092.
# Decision (no export can hold the rank-r cache of a GQA/MHA source: format hf is for DeepSeek-V3 layouts,
# whose latent cache truncate leaves alone): truncate's line and kv-cache's row say the 640 needs an engine
# caching the rank-r K / V and that the exports keep the source's 1024; asserted below, numbers included.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-nur-farr-kv-export shared-cache
cd "$T" || exit 1
out=$(e "load demo-llama as s; truncate vo rank 8 policy model-max; export td format dense; export tf format factors; load td as a; info; load tf as c; info")
line=$(grep "^KV cache per token per layer" <<<"$out")
ok "truncate's KV line: 1024 -> 640 bytes ($line)" has "$line" "whole model 1024 -> 640 bytes per token"
for f in td tf; do
    b=$(e "load $f; info" | awk '$1 == "kv_bytes_per_token" {print $2}')
    agrees_or_said() { [ "${b:-x}" = 640 ] || grep -q 'dense' <<<"$line"; }
    ok "$f: info of the export says ${b:-?}; truncate's line agrees or says what the export caches" agrees_or_said
    ok "$f: the export's cache is the source's 1024 that truncate's line names" test "${b:-x}" = 1024
done
ok "truncate's line: no export holds the 640, the exports keep 1024" \
    has "$line" "no export holds that cache (\`format dense\` and \`format factors\` keep the source's shapes: 1024)"
row=$(e "load demo-llama; truncate vo rank 8 policy model-max; kv-cache" | grep "^truncate (")
ok "kv-cache's row says the same (640 with rank-r K / V cached, exports 1024)" \
    has "$row" "640 bytes per token in 4 layers with rank-r K / V cached, no export's: they keep 1024"
cli_done
