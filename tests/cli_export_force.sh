#!/usr/bin/env bash
# cli_export_force.sh -- `export DIR ... force` for every export kind through the one checkpoint
# writer: force replaces an earlier export as a whole (a sharded TransMLA export forced over by a
# single-file one leaves no old shard or index), TPA exports take force too, keywords an export
# cannot honour (dtype / shard-mb for FaRR, shard-mb for TPA) are refused instead of ignored,
# `export ""` is refused, and no staging folder is ever left behind.
set -u
source "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-export-force
cd "$T" || exit 1

out=$("$ATTNLAB" -e "load demo-llama; convert mla kv-rank 48; export m1 shard-mb 1" 2>&1)
ok "sharded TransMLA export" test -f m1/model.safetensors.index.json
ok "it has several shards" test -f m1/model-00002-of-0000$(ls m1 | grep -c 'of-0000').safetensors
out=$("$ATTNLAB" -e "load demo-llama; convert mla kv-rank 48; export m1" 2>&1)
ok "without force: refused" has "$out" "is not empty"
out=$("$ATTNLAB" -e "load demo-llama; convert mla kv-rank 48; export m1 force" 2>&1)
ok "TransMLA export with force exits 0" test $? -eq 0
ok "force leaves exactly the new files" test "$(ls m1 | tr '\n' ' ')" = "attnlab_manifest.json config.json model.safetensors "
out=$("$ATTNLAB" -e "check m1" 2>&1)
ok "the forced export checks" has "$out" "non-attention tensors: all"

out=$("$ATTNLAB" -e "load demo-llama; convert tpa kv-rank 2; export t1; export t1 force" 2>&1)
ok "TPA export with force exits 0" test $? -eq 0
out=$("$ATTNLAB" -e "load demo-llama; convert tpa kv-rank 2; export t2 shard-mb 5" 2>&1)
ok "TPA refuses shard-mb" has "$out" "shard-mb is not taken by a TPA export"
ok "nothing written" test ! -e t2

out=$("$ATTNLAB" -e "load demo-r1; truncate vo rank 4 policy model-max; export f1 dtype q8_0" 2>&1)
ok "FaRR refuses dtype q8_0" has "$out" "a FaRR export writes its changed tensors in f32, f16, bf16 or fp8"
out=$("$ATTNLAB" -e "load demo-r1; truncate vo rank 4 policy model-max; export f1 shard-mb 10" 2>&1)
ok "FaRR refuses shard-mb" has "$out" "shard-mb is not taken by a FaRR export"
ok "nothing written" test ! -e f1
out=$("$ATTNLAB" -e "load demo-r1; truncate vo rank 4 policy model-max; export \"\"" 2>&1)
ok "export \"\" fails" test $? -eq 1
ok "export \"\" says why" has "$out" "no folder given"
for conv in "convert mla kv-rank 48" "convert tpa kv-rank 1"; do
    out=$("$ATTNLAB" -e "load demo-llama; $conv; export \"\"" 2>&1)
    ok "$conv: export \"\" fails" test $? -eq 1
    ok "$conv: export \"\" says why" has "$out" "no folder given"
done
out=$("$ATTNLAB" -e "load demo-r1; truncate vo rank 4 policy model-max; lua attn.export(\"\")" 2>&1)
ok "attn.export(\"\") fails" test $? -eq 1
ok "attn.export(\"\") says why" has "$out" "no folder given"

# Demo generation is staged too: Ctrl-C while a demo is being written leaves no folder and no
# staging folder in the cache, and the next load writes it whole.
dcache="$T/demo-cache"
for i in 1 2 3; do
    rm -rf "$dcache"
    ATTNLAB_CACHE="$dcache" "$ATTNLAB" -e "load demo-r1" >/dev/null 2>&1 &
    pid=$!
    sleep "0.$((RANDOM % 30))"
    kill -INT "$pid" 2>/dev/null
    wait "$pid"
    left=$(ls -A "$dcache" 2>/dev/null | grep -v '^demo-r1-v[0-9]*$' | tr '\n' ' ')
    ok "interrupted demo generation leaves nothing else in the cache [$left]" test -z "$left"
    [ -d "$dcache"/demo-r1-v1 ] && ok "a demo folder there is complete" test -f "$dcache"/demo-r1-v1/config.json
done
out=$(ATTNLAB_CACHE="$dcache" "$ATTNLAB" -e "load demo-r1" 2>&1)
ok "the next load opens the demo" has "$out" "loaded demo-r1"

# Ctrl-C at random points of a forced export over an earlier one: the folder is always either the
# old export or the new one, whole -- never a mix -- and no staging folder is left.
"$ATTNLAB" -e "load demo-r1; truncate vo rank 4 policy model-max; export ix" >/dev/null 2>&1
old=$(ls ix | tr '\n' ' ')
ok "the earlier export is there" test -f ix/farr_manifest.json
mixed=0
for i in 1 2 3 4 5 6 7 8 9 10; do
    "$ATTNLAB" -e "load demo-r1; truncate vo rank 16 policy model-max; export ix format factors force" >/dev/null 2>&1 &
    pid=$!
    sleep "0.$((RANDOM % 40))"
    kill -INT "$pid" 2>/dev/null
    wait "$pid"
    now=$(ls ix | tr '\n' ' ')
    if grep -q '"factors"' ix/farr_manifest.json; then
        [ -f ix/farr/factors.safetensors ] || mixed=$((mixed + 1))
    else
        [ "$now" = "$old" ] || mixed=$((mixed + 1))
    fi
    [ -z "$(ls -A "$T" | grep -e staging -e '\.old\.')" ] || mixed=$((mixed + 1))
done
ok "Ctrl-C never leaves a mixed folder or a staging folder" test "$mixed" -eq 0

ok "no staging folder left" test -z "$(ls -A "$T" | grep -e staging -e '\.old\.')"
# lint the forced exports (issue 13, 4): the TransMLA one is stock DeepSeek-V3 (transformers, vLLM,
# SGLang load it; the demo has no tokenizer for llama.cpp's converter), the FaRR one keeps the family
out=$("$ATTNLAB" -e "lint m1; lint ix" 2>&1)
ok "lint of the forced exports" test "$(grep -Ec '^(transformers|vLLM|SGLang) +DeepseekV3ForCausalLM +loads( with --skip-tokenizer-init .*)? *$' <<<"$out")" = 6
ok "lint: llama.cpp's converter wants a tokenizer" test "$(grep -c 'llama.cpp: no tokenizer files' <<<"$out")" = 2

cli_done
