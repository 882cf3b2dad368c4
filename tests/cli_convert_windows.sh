#!/usr/bin/env bash
# cli_convert_windows.sh -- issue 30 section 1: conversions on windowed, soft-capped, sink and NoPE
# models (they were refused before). On the synthetic checkpoints of
#   gemma2  (sliding windows of 8 on alternate layers, soft-caps 5 / 10),
#   gpt_oss (windows on layers 0 and 2, a sink logit per head),
#   smollm3 (layer 3: no RoPE, window 8):
# - `convert tpa kv-rank 2` (R = the KV heads: exact) keeps the source's perplexity to 1e-6 and its
#   `check` passes: the converted layers keep the window, soft-cap and sinks;
# - `convert mla kv-rank full layers 3-3` on smollm3's NoPE layer (RoPE frequencies 0, window 8) is
#   exact: ppl to 1e-6, check's out_err < 1e-5; on every layer it runs, check agrees with the report;
# - `convert mla-table` runs on the NoPE layer (every row at full rank keeps the perplexity);
# - `export` of the MLA refuses, naming what the stock layout lacks (window, sinks, soft-cap, NoPE); the TPA
#   export (attnlab's own layout) holds them and `check DIR` passes.
# (olmo3's windows come with a q/k norm, which convert refuses: another slice of the issue.)
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-convert-windows shared-cache
cd "$T" || exit 1

seq 1 40 | awk '{printf "%d ", ($1*37)%250+1}' >x40.ids
# max_err COL: the largest value in column COL of check's per-layer rows (after "check of")
max_err() { sed -n '/^check of/,$p' out.txt |
    awk -v c="$1" '$1 ~ /^[0-9]+$/ && NF >= c { if ($c + 0 > m) m = $c + 0 } END { printf "%g", m + 0 }'; }

for f in gemma2 gpt_oss smollm3; do
    "$B" -e "synth family $f $T/$f" >/dev/null 2>&1 || { fail "synth family $f"; continue; }
    p0=$(ppl_of "load $T/$f; ppl ids x40.ids")
    case $p0 in ERR:*) fail "$f: source ppl: $p0"; continue ;; esac
    p1=$(ppl_of "load $T/$f; convert tpa kv-rank 2 ppl off; ppl ids x40.ids")
    case $p1 in ERR:*) fail "$f: convert tpa kv-rank 2: $p1" ;;
        *) near "$p1" "$p0" 1e-6 || fail "$f: convert tpa kv-rank 2 changes ppl $p0 -> $p1" ;; esac
    run -e "load $T/$f; convert tpa kv-rank 2 ppl off; check"
    ok "$f: convert tpa + check run" test "$(rc)" = 0
    ok "  check passes as exact" grep -q "the conversion claims to be exact: largest output error .*: PASS" out.txt
    e=$(max_err 3)
    awk -v e="$e" 'BEGIN { exit !(e < 1e-5) }' || fail "$f: convert tpa kv-rank 2: check's out_err $e"
    run -e "load $T/$f; convert tpa kv-rank 2 ppl off; export $T/$f-tpa"
    ok "$f: the TPA export (attnlab's layout) holds the window, soft-cap, sinks and NoPE layer" test "$(rc)" = 0
    run -e "check $T/$f-tpa"
    ok "  and check DIR passes as exact" grep -q "the conversion claims to be exact: largest output error .*: PASS" out.txt
    run -e "load $T/$f; convert mla kv-rank full ppl off; check; export $T/$f-mla"
    ok "$f: convert mla + check run on every layer" grep -q "out_err within 0 of it in all 4 layers" out.txt
    ok "  the MLA export is refused" test "$(rc)" = 1
    ok "  and wrote nothing" test ! -e "$T/$f-mla"
    cp err.txt "$f-mla.err"
done
ok "gemma2's MLA export names the window and the soft-cap" \
    grep -q "no stock DeepSeek-V3 form for gemma2.s sliding window (.*attention soft-cap (" gemma2-mla.err
ok "gpt_oss's names the window and the sinks" grep -q "no stock DeepSeek-V3 form for gpt_oss.s sliding window (.*attention sinks (" gpt_oss-mla.err
ok "smollm3's names the NoPE layer" grep -q "NoPE layers (DeepSeek-V3 has one RoPE for every layer" smollm3-mla.err

# smollm3's NoPE layer (with its window) converts exactly: no RoPE part turns
p0=$(ppl_of "load $T/smollm3; ppl ids x40.ids")
p1=$(ppl_of "load $T/smollm3; convert mla kv-rank full layers 3-3 ppl off; ppl ids x40.ids")
case $p1 in ERR:*) fail "smollm3: convert mla layers 3-3: $p1" ;;
    *) near "$p1" "$p0" 1e-6 || fail "smollm3: convert mla on the NoPE layer changes ppl $p0 -> $p1" ;; esac
run -e "load $T/smollm3; convert mla kv-rank full layers 3-3 ppl off; check"
ok "smollm3: check of the NoPE layer's conversion runs" test "$(rc)" = 0
e=$(max_err 3)
awk -v e="$e" 'BEGIN { exit !(e < 1e-5 && e > 0) }' || fail "smollm3: layer 3's out_err $e, not < 1e-5 [$(cat out.txt)]"
# and it is not exact by accident: a RoPE layer at the same rank loses half its rotary dims
p2=$(ppl_of "load $T/smollm3; convert mla kv-rank full layers 2-2 ppl off; ppl ids x40.ids")
near "$p2" "$p0" 1e-4 && fail "smollm3: the RoPE layer 2 converts exactly too ($p2): the test cannot tell"
# convert mla-table runs on the NoPE layer too (it was refused by the merge): every row keeps the ppl
seq 1 64 | awk '{printf "%d ", ($1*37)%250+1}' >x64.ids
run -e "load $T/smollm3; convert mla-table kv-ranks full layers 3-3 ids x64.ids seqlen 32"
ok "smollm3: convert mla-table on the NoPE layer runs" test "$(rc)" = 0
p0=$(grep -o 'original [0-9.e+-]*' out.txt | sed 's/original //')
n=$(awk '$1 == 96 && NF == 8 { print $8 }' out.txt | while read -r p; do near "$p" "$p0" 1e-5 && echo ok; done | wc -l)
[ -n "$p0" ] && [ "$n" = 4 ] || fail "smollm3: mla-table at full rank: $n of 4 rows keep ppl $p0 [$(cat out.txt err.txt)]"
cli_done
