#!/bin/bash
# cli_family_table.sh -- the family table is the one list of families: `help load` prints one line
# per row (model_type and what it is), and the README's Families table names every model_type the
# table has (llama2c as llama2.c), so the front door cannot drift from the code.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-family-table
README=$(dirname "$0")/../README.md
cd "$T" || exit 1

run -e "help load"
ok "help load runs" [ "$(rc)" = 0 ]
types=$(sed -n '/^families (config.json model_type/,/^$/p' out.txt | awk 'NF >= 2 && /^  / {print $1}')
n=$(wc -w <<<"$types")
ok "help load lists the families ($n)" [ "$n" -ge 16 ]
has "$types" deepseek_v3 || fail "deepseek_v3 missing from help load: $types"
# the README's Families table: the rows between its header and the next blank line
table=$(sed -n '/^| family (`model_type`)/,/^$/p' "$README" | cut -d'|' -f2)
for t in $types; do
    want=$t
    [ "$t" = llama2c ] && want=llama2.c
    grep -qw -- "$want" <<<"$table" || fail "README's family table lacks $want (a row of the family table)"
done
# and no README row names a model_type the table lacks
for w in $(tr ',' ' ' <<<"$table" | tr -d '()' | awk '{for (i = 1; i <= NF; i++) print $i}' | grep -E '^[a-z0-9_.]+$'); do
    case $w in family|pythia|yes|no) continue ;; esac
    w2=$w
    [ "$w" = llama2.c ] && w2=llama2c
    grep -qx -- "$w2" <<<"$types" || fail "README's family table names '$w', which is not a row of the family table"
done
cli_done
