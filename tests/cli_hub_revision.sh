#!/bin/bash
# cli_hub_revision.sh -- a complete snapshot in the Hugging Face cache against the Hub's revisions,
# with tests/hub_server.py on 127.0.0.1: `load org/name` asks the API which commit main names now
# (one request, no bytes fetched when it is the cached one), opens the new commit when main moved,
# keeps the cached snapshot with a warning when the Hub does not answer, and asks nothing with
# HF_HUB_OFFLINE=1; `load org/name@<commit>` and `@<branch>` find snapshots/<commit> and
# refs/<branch> in the HF cache first (a commit: no request at all).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-hub-revision
command -v python3 >/dev/null && command -v curl >/dev/null || { echo "no python3 or curl: skipped"; exit 77; }

R1=$("$ATTNLAB" -e "load demo-r1; info" 2>&1 | sed -n 's/^path  *//p')
LL=$("$ATTNLAB" -e "load demo-llama; info" 2>&1 | sed -n 's/^path  *//p')
[ -d "$R1" ] && [ -d "$LL" ] || { echo "FAIL: no demo folders [$R1] [$LL]"; exit 1; }
mkdir -p "$T/root/acme/r1" "$T/root/acme/r1-next"
cp "$R1"/* "$T/root/acme/r1/"
cp "$LL"/* "$T/root/acme/r1-next/"       # what main moves to: another model (llama), another commit
python3 "$ATTNLAB_SRC/tests/hub_server.py" --root "$T/root" --port-file "$T/port" >"$T/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null' EXIT
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port")
export HF_ENDPOINT=http://127.0.0.1:$PORT HF_HUB_CACHE=$T/hf HF_HOME=$T/hfhome
unset HF_TOKEN HF_HUB_OFFLINE HF_TOKEN_PATH
stat_of() { curl -s "$HF_ENDPOINT/_stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
ctl() { curl -s "$HF_ENDPOINT/$1" >/dev/null; }
rows() { grep -E '^ *[0-9]+ +[0-9]+ +[0-9]+ '; }     # the rank table's rows (the title names the model)
sha1() { python3 -c "import hashlib,sys; print(hashlib.sha1(sys.argv[1].encode()).hexdigest())" "$1"; }
old=$(sha1 acme/r1)
new=$(sha1 acme/r1-next)

# the HF cache holds acme/r1 at $old whole, as huggingface-cli leaves it (refs/main, the snapshot)
hfr=$T/hf/models--acme--r1
mkdir -p "$hfr/refs" "$hfr/snapshots/$old"
cp "$R1"/* "$hfr/snapshots/$old/"
printf %s "$old" >"$hfr/refs/main"
"$ATTNLAB" -e "load $hfr/snapshots/$old; ranks vo all" 2>&1 | tail -n +2 >"$T/local.txt"
ok "local ranks vo: $(rows <"$T/local.txt" | wc -l) rows" test "$(rows <"$T/local.txt" | wc -l)" -ge 10

# ---- offline: the cached snapshot, no request
ctl _reset
out=$(HF_HUB_OFFLINE=1 "$ATTNLAB" -e "load acme/r1; info" 2>&1)
ok "offline: the cached snapshot [$(grep '^path' <<<"$out")]" has "$out" "^path  *$hfr/snapshots/$old$"
ok "offline: no request ($(stat_of api_requests))" test "$(stat_of api_requests)" = 0

# ---- online, main unmoved: one API request, the cached snapshot, no byte fetched
out=$("$ATTNLAB" -e "load acme/r1; info" 2>&1)
ok "online, main where the cache has it: the cached snapshot [$(grep '^path' <<<"$out")]" has "$out" "^path  *$hfr/snapshots/$old$"
ok "online: the API was asked once ($(stat_of api_requests))" test "$(stat_of api_requests)" = 1
ok "online: no byte fetched ($(stat_of store_bytes))" test "$(stat_of store_bytes)" = 0
hasnt "$out" "warning" || fail "online, unmoved: a warning [$out]"

# ---- the Hub does not answer: the cached snapshot, with a warning saying what happened
out=$(HF_ENDPOINT=http://127.0.0.1:1 timeout 60 "$ATTNLAB" -e "load acme/r1; ranks vo all" 2>&1)
ok "dead endpoint: warns [$(head -c 300 <<<"$out")]" has "$out" "acme/r1: model 'acme/r1' (revision main): http://127.0.0.1:1: .*using the cached snapshot $old"
ok "dead endpoint: the cached snapshot's numbers" cmp -s <(rows <"$T/local.txt") <(rows <<<"$out")

# ---- org/name@<commit>: snapshots/<commit> first, no request even online
ctl _reset
out=$("$ATTNLAB" -e "load acme/r1@$old; info" 2>&1)
ok "@commit: the cached snapshot [$(grep '^path' <<<"$out")]" has "$out" "^path  *$hfr/snapshots/$old$"
ok "@commit: no request ($(stat_of api_requests))" test "$(stat_of api_requests)" = 0
out=$(HF_HUB_OFFLINE=1 "$ATTNLAB" -e "load acme/r1@$old; ranks vo all" 2>&1)
ok "@commit offline: the cached snapshot's numbers [$(head -c 200 <<<"$out")]" cmp -s <(rows <"$T/local.txt") <(rows <<<"$out")

# ---- org/name@<branch>: refs/<branch> first; online it is checked with the Hub like main
printf %s "$old" >"$hfr/refs/v1"
out=$(HF_HUB_OFFLINE=1 "$ATTNLAB" -e "load acme/r1@v1; info" 2>&1)
ok "@branch offline: refs/v1's snapshot [$(head -c 200 <<<"$out")]" has "$out" "^path  *$hfr/snapshots/$old$"
ctl "_control?ref=acme/r1&name=v1&to=acme/r1"
ctl _reset
out=$("$ATTNLAB" -e "load acme/r1@v1; info" 2>&1)
ok "@branch online, unmoved: refs/v1's snapshot [$(grep '^path' <<<"$out")]" has "$out" "^path  *$hfr/snapshots/$old$"
ok "@branch online: one request, no byte ($(stat_of api_requests), $(stat_of store_bytes))" test "$(stat_of api_requests)" = 1 -a "$(stat_of store_bytes)" = 0

# ---- main moves on the Hub: the next load opens the new commit (streamed), not the cached one
export ATTNLAB_CACHE=$T/cache-moved      # attnlab's cache fresh: nothing above streams acme/r1 for it
ctl "_control?ref=acme/r1&name=main&to=acme/r1-next"
out=$("$ATTNLAB" -e "load acme/r1; info" 2>&1)
ok "main moved: the new commit's model [$(head -c 200 <<<"$out")]" has "$out" "^loaded r1: llama"
ok "main moved: opened at $new [$(grep '^path' <<<"$out")]" has "$out" "^path  *.*/snapshots/$new$"
ok "main moved: refs/main = the new commit" test "$(cat "$hfr/refs/main")" = "$new"
ok "main moved: the old snapshot is still there" test -f "$hfr/snapshots/$old/config.json"
out=$(HF_HUB_OFFLINE=1 "$ATTNLAB" -e "load acme/r1@$old; ranks vo all" 2>&1)
ok "main moved: @old commit offline still gives the old numbers" cmp -s <(rows <"$T/local.txt") <(rows <<<"$out")
# ... and, attnlab streaming that commit now, a Hub that does not answer leaves it in use with a warning
out=$(HF_ENDPOINT=http://127.0.0.1:1 timeout 60 "$ATTNLAB" -e "load acme/r1; info" 2>&1)
ok "streamed, dead endpoint: warns [$(head -c 300 <<<"$out")]" has "$out" "model 'acme/r1' (revision main): http://127.0.0.1:1: .*using attnlab's cached snapshot $new"
ok "streamed, dead endpoint: the new commit's model" has "$out" "^path  *.*/snapshots/$new$"
out=$(HF_ENDPOINT=http://127.0.0.1:1 timeout 60 "$ATTNLAB" -e "load acme/nope" 2>&1)
ok "dead endpoint, nothing cached: the error [$(head -c 200 <<<"$out")]" has "$out" "not found.*http://127.0.0.1:1: .*after 6 tries"
cli_done
