#!/usr/bin/env bash
# cli_nur_ids_escape.sh -- (nur's review) README: "control characters escaped in messages". A token-ids file
# (`ppl ids FILE`, `calibrate ids FILE`) with an escape code in place of an id prints it raw: lm_read_ids
# (commands/ws_lm.c) quotes the next 12 bytes with '%.12s', so "12 ESC[31mRED BEL 5" reaches the terminal
# as ESC [ 3 1 m ... BEL (and the quote runs past the bad token into the next one). FAILS on cb14092.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-nur-ids-escape shared-cache
cd "$T" || exit 1
printf '12 \033[31mRED\007 5' > ctl.txt
for c in "ppl ids ctl.txt seqlen 2" "calibrate ids ctl.txt samples 1 seqlen 2"; do
    out=$(e "load demo-llama; $c")
    ok "$c: refused, naming the token" has "$out" "token 2 "
    ok "$c: no escape byte printed raw" test "$(printf '%s' "$out" | tr -d -c '\033' | wc -c)" -eq 0
    ok "$c: no BEL printed raw" test "$(printf '%s' "$out" | tr -d -c '\007' | wc -c)" -eq 0
    ok "$c: the token escaped, up to its end (not into the next one)" has "$out" "token 2 ('\\\\x1b\\[31mRED\\\\x07') is not"
done
cli_done
