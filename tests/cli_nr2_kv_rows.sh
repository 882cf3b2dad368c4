#!/usr/bin/env bash
# cli_nr2_kv_rows.sh -- (nur's review, trust) `kv-cache` had no row for `kvsvd learn` (KQ-SVD's cache) and
# `kv-cache context N` ignored the session's truncation. Now each learned method has a row (the same rule as the
# others: K+V values per token per layer, their bytes, attention parameters per layer -- the model's plus the
# projections export writes), and `context N` adds a total row per transformation (exact where every layer keeps
# N tokens). stories260K-hf: 5 layers, 4 KV heads of 8, F32; rank 4: 4 (4 + 4) = 32 values a layer, 128 bytes;
# params 12288 + 2 x 4 (8 x 4 + 8 x 4) = 12800; truncate vo rank 4: 48 values a layer; at N = 100 over 5 layers
# 24000 values (96000 bytes), KQ-SVD 16000 (64000). FAILS on 3e93937 (no such rows).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K-hf
cli_setup /tmp/attnlab-cli-nr2-kv-rows shared-cache
cd "$T" || exit 1
cp "${ATTNLAB_SRC:-$(dirname "$0")/..}/examples/tinystory.txt" story.txt || exit 1
S="load $M/stories260K-hf as s; calibrate story.txt samples 4 seqlen 64; kvsvd learn kqsvd rank 4"
e "$S; kv-cache to kv.csv" >/dev/null
row=$(grep '^"kvsvd learn kqsvd' kv.csv)
ok "kv-cache: the kqsvd row: $row" has "$row" "K+V per token per layer 64 -> 32, mean over 5 layers; 640 bytes per token in 5 layers; x0.5)\",32,128,12800$"
e "$S; kvsvd learn all rank 4; kv-cache to kv2.csv" >/dev/null
ok "kvsvd learn all: a row per method" [ "$(grep -c '^"kvsvd learn ' kv2.csv)" = 3 ]
e "$S; truncate vo rank 4; kv-cache context 100 to ctx.csv" >/dev/null
t=$(grep '^"total KV cache with truncate' ctx.csv)
ok "context 100: the truncation's total: $t" has "$t" ",,5,100,48,24000,96000$"
k=$(grep '^"total KV cache with kvsvd learn kqsvd' ctx.csv)
ok "context 100: the projections' total: $k" has "$k" ",,5,100,32,16000,64000$"
ok "context 100: the model's total stays" grep -q '^total KV cache,,5,,,32000,128000$' ctx.csv
ok "context 100: rows oldest first (kvsvd learn, then truncate)" [ "$(grep -n 'kvsvd learn kqsvd' ctx.csv | cut -d: -f1)" -lt "$(grep -n 'with truncate' ctx.csv | cut -d: -f1)" ]
cli_done
