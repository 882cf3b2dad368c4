#!/usr/bin/env bash
# cli_nr2_inputs.sh -- (nur's review, trust) `ppl` and `check` take the same input forms: `ppl` refused `text FILE`
# (which `check` requires) and `check` had no `ids FILE` (which `ppl` takes); now both take `text FILE` and
# `ids FILE` (ppl also a bare FILE), and the same input gives the same number: ppl of a truncation is check's
# `after`. An ids entry "3x" was read as 3 then refused at 'x' (strtol), naming the next token: now the entry
# itself is refused, named. Integer ranges printed with %g ("1-1.07374e+09") print as integers.
# FAILS on 3e93937 (ppl text: refused; check ids: unexpected argument; "token 3 ('x')"; "1-1.07374e+09").
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K-hf
cli_setup /tmp/attnlab-cli-nr2-inputs shared-cache
cd "$T" || exit 1
cp "${ATTNLAB_SRC:-$(dirname "$0")/..}/examples/tinystory.txt" story.txt || exit 1
L="load $M/stories260K-hf as s"
e "$L; tokenize file story.txt to ids.txt" >/dev/null
out=$(e "$L; truncate vo rank 4; ppl text story.txt; ppl ids ids.txt; ppl story.txt; check text story.txt; check ids ids.txt")
rows=$(grep -E '^ +1127 +2\.27885 +9\.76547$' <<<"$out" | wc -l)
ok "ppl text FILE, ppl ids FILE and ppl FILE: one number, 9.76547 on 1127 tokens (got $rows rows)" [ "$rows" = 3 ]
ok "check text FILE: after = ppl's" has "$out" "perplexity on 1127 tokens, story.txt (given: 1130 tokens), windows of 512: 3.7555 before (source), 9.76547 after"
ok "check ids FILE: after = ppl's" has "$out" "perplexity on 1127 tokens, ids.txt (given: 1130 tokens), windows of 512: 3.7555 before (source), 9.76547 after"
out=$(e "$L; truncate vo rank 4; export ex format dense; check ex ids ids.txt")
ok "check DIR ids FILE: the export's after = ppl's" has "$out" "perplexity on 1127 tokens, ids.txt (given: 1130 tokens), windows of 512: 3.7555 before (source), 9.76547 after (the export"
out=$(e "$L; truncate vo rank 4; check text story.txt ids ids.txt")
ok "check text and ids together: refused by name" has "$out" "give \`text FILE\` or \`ids FILE\` (as ppl takes them), not both"
out=$(e "$L; ppl words story.txt")
ok "ppl WORD FILE names the three forms" has "$out" "ppl: give FILE or \`text FILE\` (a text), or \`ids FILE\` (token ids), not 'words'"
printf '1 3x 5\n' > bad.txt
out=$(e "$L; ppl ids bad.txt")
ok "ids entry 3x refused as itself: $out" has "$out" "bad.txt: token 2 ('3x') is not a non-negative integer id"
out=$(e "$L; truncate vo rank 4; check ids bad.txt")
ok "check ids FILE reads ids as ppl does" has "$out" "token 2 ('3x') is not a non-negative integer id"
out=$(e "$L; kv-cache context 0")
ok "integer range as integers: $out" has "$out" "context 0 is out of range: valid values are 1-1073741824$"
out=$(e "set precision 99")
ok "set's integer range as integers: $out" has "$out" "'99' is not an integer 1-17$"
cli_done
