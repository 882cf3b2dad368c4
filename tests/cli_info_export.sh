#!/bin/bash
# cli_info_export.sh -- `info`'s "export formats" line lists the MLA export only where `export`
# writes it: a model `convert mla` converts but whose other layers a DeepSeek-V3 checkpoint cannot
# hold (GLM-4.5-Air's MoE MLPs, GPT-NeoX's parallel LayerNorm blocks) gets "mla" with that reason,
# in the session only; demo-llama keeps it, and `export` agrees with the line in each case.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-info-export shared-cache
cd "$T" || exit 1

fmt() { grep '^export formats' out.txt; }

run -e "synth family glm4_moe $T/glm"
sed -i -E 's/"use_qk_norm":[[:space:]]*true/"use_qk_norm": false/' "$T/glm/config.json"
run -e "load $T/glm; info"
ok "air: convert mla yes" grep -Eq '^convert mla +yes$' out.txt
ok "air: export formats without mla in its yes list" has "$(fmt)" "^export formats  *yes: truncate, tpa, kvsvd "
ok "  mla named, in the session only, for the MoE MLPs" has "$(fmt)" "not: mla: .*mixture of experts.*in the session"
run -e "load $T/glm; convert mla kv-rank 16; export $T/glm-mla"
ok "air: export mla refused as the line says" test "$(rc)" = 1

run -e "synth family gpt_neox $T/neox"
run -e "load $T/neox; info"
ok "neox: convert mla yes" grep -Eq '^convert mla +yes$' out.txt
ok "neox: export formats without mla" has "$(fmt)" "^export formats  *yes: truncate, tpa, kvsvd "
ok "  mla named for its blocks" has "$(fmt)" "not: mla: .*parallel"
run -e "load $T/neox; convert mla kv-rank 16; export $T/neox-mla"
ok "neox: export mla refused" test "$(rc)" = 1

run -e "load demo-llama; info"
ok "demo-llama: every format" has "$(fmt)" "^export formats  *yes: truncate, mla, tpa, kvsvd$"
cli_done
