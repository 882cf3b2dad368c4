#!/usr/bin/env bash
# cli_nur_farr_export_ppl.sh -- (nur's review, trust) "what perplexity will my truncated model have" gets one
# answer: `ppl` / `check` of the FaRR working copy, `check DIR` of its default export (dense, the source's
# BF16) and `ppl` of that export reloaded. On demo-llama at tau 0.99 (layers 1-2 cut) they are
# bf16 mode: 315.899 (session) vs 315.446 (export, both ways) -- a gap of 0.14% beside the cut's effect of
# -0.11% (316.234 before). `convert mla` holds its rewritten matrices at its export's BF16 rounding in bf16 mode
# (tmla_hold.h: one number, cli_bf16_hold.sh); the FaRR working copy does not. (f32 mode: 316.134 vs 315.97;
# there the session is the f32 export's by design, README "the same numbers for an f32 export", so it is not
# asserted here.) demo-r1 (FP8, exported BF16) likewise: 376.674 vs 376.425 in bf16 mode (f32 mode: 376.776 vs
# 376.327). FAILS on cb14092.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-nur-farr-export-ppl shared-cache
cd "$T" || exit 1
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
cut -d' ' -f257-300 ids.txt > valid.txt
for src in demo-llama demo-r1; do
    mode=bf16
    rm -rf ex-$mode
    out=$(e "set compute $mode; load $src as s; calibrate ids ids.txt samples 4 seqlen 32; truncate vo tau 0.99; check; export ex-$mode format dense; check ex-$mode; load ex-$mode as t; ppl ids valid.txt seqlen 32")
    afters=$(grep "^perplexity on 42 tokens" <<<"$out" | sed -E 's/.*, ([0-9.]+) after.*/\1/' | tr '\n' ' ')
    reload=$(grep "^    42 " <<<"$out" | tail -1 | awk '{print $3}')
    ok "$src $mode: check and check DIR printed ($afters)" test "$(wc -w <<<"$afters")" = 2
    ok "$src $mode: check's after = check DIR's after of the default export ($afters)" test "$(echo $afters | cut -d' ' -f1)" = "$(echo $afters | cut -d' ' -f2)"
    ok "$src $mode: check's after = ppl of the reloaded export ($reload)" test "$(echo $afters | cut -d' ' -f1)" = "$reload"
done
cli_done
