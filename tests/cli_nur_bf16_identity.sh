#!/usr/bin/env bash
# cli_nur_bf16_identity.sh -- (nur's review, trust) an exact transformation must not move the perplexity in
# either compute mode. In `set compute bf16` on demo-llama (BF16 weights), `truncate vo rank 32` (full rank:
# the identity, fused-map error 4e-8) and `convert tpa kv-rank 2` (exact: check says PASS, 6e-7) report
# 316.234 before -> 316.38 / 316.45 after (+0.05% / +0.07%), where f32 mode reports 316.602 -> 316.602.
# The "after" runs the transformed layers in float32 while the "before" runs the BF16 source in BF16, so the
# difference is the compute path, not the transformation. FAILS on cb14092.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-nur-bf16-identity shared-cache
cd "$T" || exit 1
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
CAL="calibrate ids ids.txt samples 4 seqlen 32"
# before / after of check's perplexity line
ba() { grep "^perplexity on 42 tokens" <<<"$1" | head -1 | sed -E 's/.*: ([0-9.]+) before.*, ([0-9.]+) after.*/\1 \2/'; }
for mode in f32 bf16; do
    for xf in "truncate vo rank 32" "convert tpa kv-rank 2"; do
        out=$(e "set compute $mode; load demo-llama as s; $CAL; $xf; check")
        read -r b a <<<"$(ba "$out")"
        ok "$mode, $xf: check ran (before $b)" test -n "${b:-}" -a -n "${a:-}"
        ok "$mode, $xf (exact): after $a = before $b" test "${a:-x}" = "${b:-y}"
    done
done
cli_done
