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

out=$("$ATTNLAB" -e "load demo-r1; truncate vo rank 4 policy model-max; export f1 dtype bf16" 2>&1)
ok "FaRR refuses dtype" has "$out" "dtype is not taken by a FaRR export"
out=$("$ATTNLAB" -e "load demo-r1; truncate vo rank 4 policy model-max; export f1 shard-mb 10" 2>&1)
ok "FaRR refuses shard-mb" has "$out" "shard-mb is not taken by a FaRR export"
ok "nothing written" test ! -e f1
out=$("$ATTNLAB" -e "load demo-r1; truncate vo rank 4 policy model-max; export \"\"" 2>&1)
ok "export \"\" fails" test $? -eq 1
ok "export \"\" says why" has "$out" "no folder given"

ok "no staging folder left" test -z "$(ls -A "$T" | grep -e staging -e '\.old\.')"
cli_done
