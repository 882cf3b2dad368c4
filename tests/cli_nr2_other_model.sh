#!/usr/bin/env bash
# cli_nr2_other_model.sh -- (nur's review, trust) after `load ... as b` (a second model), `check` and `export` said
# "truncate or convert first" while model a held the truncation; now they name it and what to do (`use a`, then
# `check` / `export DIR`). After `close` (no model left) `check` said "nothing to check: ... truncate or convert
# first" with no model to do it on; now it says none is loaded and what to do. FAILS on 3e93937.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K-hf
cli_setup /tmp/attnlab-cli-nr2-other-model shared-cache
cd "$T" || exit 1
TWO="load $M/stories260K-hf as a; truncate vo rank 4; load $M/stories260K/stories260K.bin as b"
out=$(e "$TWO; check")
ok "check on b names a's truncation: $out" has "$out" "check: nothing to check for b (the current model): \`use a\`, then \`check\` (a has \`truncate vo rank 4\`); or give an export folder"
out=$(e "$TWO; export x")
ok "export on b names a's truncation: $out" has "$out" "nothing to export for b (the current model): \`use a\`, then \`export DIR\` (a has \`truncate vo rank 4\`); or run"
ok "nothing written" [ ! -e x ]
out=$(e "$TWO; use a; check" | grep -c "^check of a with truncate vo rank 4")
ok "use a; check: checks it ($out)" [ "$out" = 1 ]
out=$(e "load $M/stories260K-hf as a; close; check")
ok "check after close: says no model is loaded: $out" has "$out" "check: nothing to check: no model is loaded -- \`load NAME\`, truncate or convert it, then \`check\`; or \`check DIR\` of an export folder"
out=$(e "load $M/stories260K-hf as a; check")
ok "check with nothing anywhere: no other model named" has "$out" "check: nothing to check for a (the current model): give an export folder"
cli_done
