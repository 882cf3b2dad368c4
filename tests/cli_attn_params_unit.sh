#!/usr/bin/env bash
# cli_attn_params_unit.sh (nur's cli_nur_attn_params.sh) -- (nur's review, trust) the same label, two units: on demo-llama (4 layers, 163840
# attention parameters per layer, 655360 in all) `convert mla kv-rank 16` says "attention parameters 655360 ->
# 868352" (the whole model's: commands/cmd_convert.c) while `convert tpa kv-rank 2` says "attention parameters
# 163840 -> 163848" (per layer: commands/cmd_tpa.c), each right after "KV cache per token per layer". A reader
# comparing the two lines compares a model's count with a layer's. kv-cache's attn_params column is per layer
# (163840, and 217088 for the MLA row). Asserted: the "before" is the same number on both lines. FAILS on cb14092.
# Decision: both lines say "attention parameters per layer X -> Y (N converted layers: NX -> NY)", the per-layer
# numbers kv-cache's attn_params column gives; asserted against kv-cache's rows.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-nur-attn-params shared-cache
cd "$T" || exit 1
m=$(e "load demo-llama; convert mla kv-rank 16 ppl off" | grep -o "attention parameters per layer [0-9]* -> [0-9]*")
t=$(e "load demo-llama; convert tpa kv-rank 2 ppl off" | grep -o "attention parameters per layer [0-9]* -> [0-9]*")
ok "convert mla's line ($m)" test -n "$m"
ok "convert tpa's line ($t)" test -n "$t"
ok "the same source's attention parameters, one unit: '$(cut -d' ' -f5 <<<"$m")' = '$(cut -d' ' -f5 <<<"$t")'" \
    test "$(cut -d' ' -f5 <<<"$m")" = "$(cut -d' ' -f5 <<<"$t")"
ok "convert mla: per layer 163840 -> 217088 (kv-cache's GQA and MLA-row numbers)" test "$m" = "attention parameters per layer 163840 -> 217088"
ok "convert tpa: per layer 163840 -> 163848" test "$t" = "attention parameters per layer 163840 -> 163848"
out=$(e "load demo-llama; convert mla kv-rank 16 ppl off; convert tpa kv-rank 2 ppl off; kv-cache")
ok "  the totals beside them: 4 layers 655360 -> 868352" has "$out" "(4 converted layers: 655360 -> 868352)"
ok "  kv-cache's convert mla row: 217088 per layer" has "$(grep '^convert mla (' <<<"$out")" " 217088"
ok "  kv-cache's convert tpa row: 163848 per layer" has "$(grep '^convert tpa (' <<<"$out")" " 163848"
one=$(e "load demo-llama; convert mla kv-rank 16 layers 1 ppl off" | grep -o "attention parameters per layer.*")
ok "one layer converted: its count and no plural ($one)" test "$one" = "attention parameters per layer 163840 -> 217088 (1 converted layer: 163840 -> 217088)"
cli_done
