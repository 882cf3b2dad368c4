#!/usr/bin/env bash
# cli_e.sh -- `attnlab -e "cmd; cmd"`: exit 0 when every command succeeds, 1 at the first failing
# one (its error on stderr, later commands not run); -h; bad options; info to FILE.json.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-e shared-cache
cd "$T" || exit 1

run -e "echo a; echo b"
[ "$(rc)" = 0 ] || fail "two echoes: rc $(rc)"
[ "$(cat out.txt)" = "$(printf 'a\nb')" ] || fail "two echoes: stdout [$(cat out.txt)]"

run -e "echo a; bogus 1; echo c"
[ "$(rc)" = 1 ] || fail "failing command: rc $(rc), want 1"
[ "$(cat out.txt)" = "a" ] || fail "commands after the failure ran: [$(cat out.txt)]"
grep -q "unknown command 'bogus'" err.txt || fail "error not on stderr: [$(cat err.txt)]"
grep -q "^  echo a; bogus 1; echo c$" err.txt || fail "line not echoed: [$(cat err.txt)]"
grep -q "^          ^--- unknown command" err.txt || fail "caret misplaced: [$(cat err.txt)]"

run -e "echo a" -e "set tau 2" -e "echo never"
[ "$(rc)" = 1 ] || fail "second -e fails: rc $(rc)"
grep -q "never" out.txt && fail "third -e ran"
grep -q "set tau: '2' is not a number in (0, 1]" err.txt || fail "set tau error: [$(cat err.txt)]"

run -e "info"
[ "$(rc)" = 1 ] || fail "info without a model: rc $(rc)"
grep -q "error: info needs a model" err.txt || fail "info without model: [$(cat err.txt)]"

run -e "quit; echo after"
[ "$(rc)" = 0 ] || fail "quit: rc $(rc)"
[ -s out.txt ] && fail "ran after quit: [$(cat out.txt)]"

run -e "lua error('boom')"
[ "$(rc)" = 1 ] || fail "lua error in -e: rc $(rc)"
grep -q "boom" err.txt && grep -q "stack traceback" err.txt || fail "lua traceback: [$(cat err.txt)]"

run -e "= 6*7"
[ "$(rc)" = 0 ] && [ "$(cat out.txt)" = 42 ] || fail "= expr: rc $(rc) [$(cat out.txt)]"

run -h
[ "$(rc)" = 0 ] && grep -q "usage: attnlab" out.txt || fail "-h"
run --bogus
[ "$(rc)" = 2 ] && grep -q "unknown option '--bogus'" err.txt || fail "bad option: rc $(rc)"
run -e
[ "$(rc)" = 2 ] || fail "-e without commands: rc $(rc)"

# info of a real model, as a table and as JSON with every field
M="${ATTNLAB_MODELS:-}/stories260K-hf"
if [ -d "$M" ]; then
    run -e "load '$M' as s; info; info to x.json; info to x.csv"
    [ "$(rc)" = 0 ] || fail "info: rc $(rc) $(cat err.txt)"
    grep -Eq "^layers +5$" out.txt || fail "info table: [$(cat out.txt)]"
    grep -q "wrote x.json" out.txt || fail "info to x.json did not say so"
    grep -q "^kv_bytes_per_token_per_layer,256$" x.csv || fail "info to x.csv: [$(cat x.csv)]"
    if command -v python3 >/dev/null; then
        python3 - <<'PY' || fail "info JSON"
import json, sys
d = json.load(open("x.json"))
want = {"name": "s", "family": "llama", "layers": 5, "heads": 8, "kv_heads": 4, "hidden": 64,
        "qk_nope_head_dim": 0, "qk_rope_head_dim": 8, "v_head_dim": 8, "q_lora_rank": 0,
        "kv_lora_rank": 0, "rope_theta": 10000, "rope_layout": "rotate_half", "dtype": "F32",
        "attn_params_per_layer": 4 * 64 * 64 - 2 * 64 * 32, "attn_params_total": 5 * (4 * 64 * 64 - 2 * 64 * 32),
        "kv_values_per_token_per_layer": 64, "kv_cache_dtype": "F32",
        "kv_bytes_per_token_per_layer": 256, "kv_bytes_per_token": 1280}
bad = {k: (d.get(k), v) for k, v in want.items() if d.get(k) != v}
if bad or "path" not in d:
    print("info JSON mismatch:", bad); sys.exit(1)
PY
    else
        grep -q '"kv_bytes_per_token_per_layer":[[:space:]]*256' x.json || fail "info JSON (grep)"
    fi
    run -e "load '$M'; info to x.txt"
    [ "$(rc)" = 1 ] && grep -q "not .csv or .json" err.txt || fail "info to x.txt: rc $(rc) [$(cat err.txt)]"
else
    echo "note: $M absent, info checks on a real model skipped"
fi

# `load .` inside a model folder names the model after the folder, not "."
run -e "synth demo-gpt2 mygpt"
(cd mygpt && "$B" -e "load .; models" >../out.txt 2>../err.txt); echo $? >rc.txt
[ "$(rc)" = 0 ] && grep -q "^mygpt " out.txt || fail "load . name: [$(cat out.txt)] [$(cat err.txt)]"

cli_done
