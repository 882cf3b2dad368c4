#!/usr/bin/env bash
# cli_nr2_ranks_gqa.sh -- (nur's review, trust) on a GQA model `ranks vo` ranks query heads while `truncate ... tau`
# ranks each KV head's group, its heads' fused maps stacked: stories260K-hf (8 heads, 4 KV) at tau 0.95 has heads 0-3
# of layer 0 at rank 7, and truncate keeps 8. `ranks` now says so in a line under the table, and `ranks ... groups`
# gives the group ranks truncate keeps. FAILS on 3e93937 (no line; `groups` unknown).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K-hf
cli_setup /tmp/attnlab-cli-nr2-ranks-gqa shared-cache
cd "$T" || exit 1
out=$(e "load $M/stories260K-hf; ranks vo layer 0 tau 0.95")
ok "head 0 at rank 7" has "$out" "^    0     0       7       7        7$"
ok "the GQA line" has "$out" "^(GQA: 4 KV heads, 2 query heads each; \`truncate vo tau 0.95\` ranks each KV head's group"
e "load $M/stories260K-hf; ranks vo layer 0 tau 0.95 groups to g.csv" >/dev/null
ok "groups: group 0 (heads 0-1) at 8" grep -q '^0,0,0-1,8$' g.csv
ok "groups: four groups" [ "$(grep -c '^0,' g.csv)" = 4 ]
tr=$(e "load $M/stories260K-hf; truncate vo tau 0.95 layers 0-0" | grep '^0 ')
ok "truncate keeps the group's rank: $tr" has "$tr" "^0  *8  *8 "
out=$(e "load $M/stories260K-hf; ranks vo layer 0 groups summary")
ok "groups with summary: refused" has "$out" "ranks: \`groups\` gives the ranks truncate keeps"
out=$(e "load demo-r1; ranks vo layer 0")
ok "no GQA line on MLA" hasnt "$out" "^(GQA:"
cli_done
