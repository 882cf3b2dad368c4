#!/usr/bin/env bash
# cli_tpa_export_stats.sh -- issue 32 (one pass where one pass is enough): `export` after `convert tpa`
# forms the session's attention-input statistics (every layer's E[x xᵀ] at once, and their digest)
# only when they fit the export folder (CI_MAX_BYTES), as `export` after `convert mla` does
# (cli_export_stats.sh). Over it only the digest the conversion kept is recorded, and the line says
# why ("over the size kept in the folder"; it said "the session has no calibration of the source with
# attention inputs", which was untrue: the statistics had been formed, digested and dropped).
# ATTNLAB_CI_MAX_BYTES puts stories260K (5 x 64² doubles) over the limit. `check DIR` in the session
# still finds the statistics by their digest: its table is the one of the export that keeps them in
# its folder, and the exported factors are the same bytes.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-tpa-export-stats
cd "$T" || exit 1
M="$ATTNLAB_MODELS/stories260K-hf" TXT="$ATTNLAB_SRC/examples/tinystory.txt"
P="load $M as m; calibrate $TXT samples 4 seqlen 64 inputs on; convert tpa kv-rank 2 ppl off"

# ---- the default limit: the statistics fit, in the folder
run -e "$P; export kept; check kept to kept.csv"
[ "$(rc)" = 0 ] || fail "export (statistics kept): rc $(rc) [$(cat err.txt)]"
ok "fits: the statistics in the folder" test -f kept/check_inputs.safetensors
ok "  and the line says so" grep -q "^check inputs recorded: 64 tokens, seed [0-9]* + layer, the calibration's statistics (256 tokens of .*tinystory.txt) in check_inputs.safetensors" out.txt

# ---- over the limit: the digest alone, the statistics not formed for the export
ATTNLAB_CI_MAX_BYTES=1000 run -e "$P; export over; check over to over.csv"
[ "$(rc)" = 0 ] || fail "export (over the limit): rc $(rc) [$(cat err.txt)]"
ok "over: no statistics file" test ! -e over/check_inputs.safetensors
ok "  the line: over the size kept in the folder" grep -q "^check inputs recorded: 64 tokens, seed [0-9]* + layer and the digest of the calibration's statistics, not the statistics (over the size kept in the folder)" out.txt
ok "  not 'the session has no calibration'" hasnt "$(cat out.txt)" "the session has no calibration"
ok "  the manifest: file null" grep -q '"file":[[:space:]]*null' over/tpa_manifest.json
dk=$(grep -o '"digest":[[:space:]]*"[0-9a-f]*"' kept/tpa_manifest.json)
ok "  a digest in the kept export's manifest ($dk)" test -n "$dk"
ok "  the same digest as the kept export's" grep -q "$dk" over/tpa_manifest.json
ok "  check takes the session's statistics by that digest" grep -q "from the session's calibration of the source" out.txt
ok "  check's table: the kept export's" cmp -s kept.csv over.csv
ok "  the factors: the same bytes" cmp -s kept/tpa_factors.safetensors over/tpa_factors.safetensors
ok "  the table has the 5 layers" test "$(wc -l < over.csv)" = 6

# ---- at the limit (ws_check_take_for_export, convert mla's rule: TPA draws no means): 5 x 64² x 8 bytes
ATTNLAB_CI_MAX_BYTES=163840 run -e "$P; export at"
ok "at 163840 bytes (5 x 64² x 8): the statistics in the folder" test -f at/check_inputs.safetensors
ATTNLAB_CI_MAX_BYTES=163839 run -e "$P; export under"
ok "at 163839: the digest alone, over the size" grep -q "not the statistics (over the size kept in the folder)" out.txt
ok "  no file" test ! -e under/check_inputs.safetensors
# ---- the session's calibration has no attention inputs any more: the line says so, as convert mla's export and
# check DIR do (the old rule looked at the size alone and said "over the size kept in the folder")
ATTNLAB_CI_MAX_BYTES=1000 run -e "$P; calibrate $TXT samples 2 seqlen 32 inputs off; export gone"
ok "calibration without inputs: 'the session has no calibration'" grep -q "not the statistics (the session has no calibration of the source with attention inputs)" out.txt
cli_done
