#!/usr/bin/env bash
# cli_session.sh -- the shell's consistency (issue 15 items 8, 9, 12, 14, 15, 17): --version;
# file arguments; saving and replaying a session; transformations as a stack; settings and
# parameters as CSV columns.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-session shared-cache
cd "$T" || exit 1
export ATTNLAB_HOME="$T/home"

# ---- item 17: --version, and -h lists it
run --version
[ "$(rc)" = 0 ] && grep -qE '^attnlab [0-9]+\.[0-9]+\.[0-9]+$' out.txt || fail "--version: rc $(rc) [$(cat out.txt)] [$(cat err.txt)]"
run -h
grep -q -- "--version" out.txt || fail "-h does not list --version: [$(cat out.txt)]"
# piped input prints no banner
echo "echo hi" | "$B" >out.txt 2>err.txt
[ "$(cat out.txt)" = "hi" ] || fail "piped input prints more than its output: [$(cat out.txt)]"

# digest DIR: one line per file (relative name and sha256)
digest() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }

# ---- item 14: transformations as a stack; undo; transforms
run -e "load demo-r1-f32; truncate vo rank 4 policy model-max; export u_ref"
[ "$(rc)" = 0 ] || fail "reference export: [$(cat err.txt)]"
run -e "load demo-r1-f32; truncate vo rank 4 policy model-max; truncate qk rank 8 policy model-max; truncate vo rank 6 policy model-max; transforms; undo; undo; transforms; export u_undo"
[ "$(rc)" = 0 ] || fail "undo: [$(cat err.txt)]"
grep -q "truncate vo rank 6 policy model-max .* 2$" out.txt || fail "transforms: the command and two replaced: [$(cat out.txt)]"
grep -q "^undone: truncate of demo-r1-f32" out.txt || fail "undo says what it removed: [$(cat out.txt)]"
grep -Eq "^ +1 +demo-r1-f32 +truncate +truncate vo rank 4 policy model-max .* 0$" out.txt || fail "after two undos: [$(cat out.txt)]"
[ "$(digest u_undo)" = "$(digest u_ref)" ] || fail "export after undo differs from the first truncation's"
run -e "load demo-llama; convert mla kv-rank 32; convert mla kv-rank 16; undo; transforms; undo; undo"
[ "$(rc)" = 1 ] && grep -q "convert mla kv-rank 32 .* 0$" out.txt || fail "convert mla undo: rc $(rc) [$(cat out.txt)]"
grep -q "demo-llama has no transformation to undo" err.txt || fail "undo with nothing left: [$(cat err.txt)]"

# ---- item 12: save session FILE and run FILE round-trip; history to FILE
run -e "load demo-r1-f32; load demo-llama as gqa; set tau 0.99; convert mla kv-rank 32; use demo-r1-f32; truncate vo rank 4 policy model-max; truncate qk rank 8 policy model-max; save session s1.txt; export e1"
[ "$(rc)" = 0 ] || fail "save session: [$(cat err.txt)]"
grep -q "^set tau 0.99$" s1.txt && grep -q "^load .* as gqa$" s1.txt && grep -q "^convert mla kv-rank 32$" s1.txt \
  && grep -q "^truncate qk rank 8 policy model-max$" s1.txt && [ "$(tail -1 s1.txt)" = "use demo-r1-f32" ] \
  || fail "session file: [$(cat s1.txt)]"
run s1.txt
[ "$(rc)" = 0 ] || fail "attnlab s1.txt: [$(cat err.txt)]"
run -e "run s1.txt; save session s2.txt; export e2"
[ "$(rc)" = 0 ] && cmp -s s1.txt s2.txt || fail "round trip: [$(diff s1.txt s2.txt)] [$(cat err.txt)]"
[ "$(digest e1)" = "$(digest e2)" ] || fail "export after replay differs"
printf 'load demo-r1\nset tau 0.99\nranks vo layer 1\nhistory\nhistory to h.txt\n' | "$B" >out.txt 2>err.txt
[ "$(cat h.txt)" = "$(printf 'load demo-r1\nset tau 0.99\nranks vo layer 1')" ] || fail "history to: [$(cat h.txt)]"
run h.txt
[ "$(rc)" = 0 ] && grep -q "tau 0.99" out.txt || fail "replaying the history: [$(cat out.txt)] [$(cat err.txt)]"

# ---- item 15: settings and parameters as CSV columns (set csv.params on), so sweeps concatenate
run -e "load demo-r1-f32; set csv.params on; set tau 0.99; ranks vo layer 2 to r99.csv; ranks vo layer 2 tau 0.9 to r90.csv; truncate vo rank 4 policy model-max to tr.csv; set format csv; ranks qk layer 1; info to i.csv"
[ "$(rc)" = 0 ] || fail "csv.params: [$(cat err.txt)]"
[ "$(head -1 r99.csv)" = "layer,head,rank_v,rank_o,rank_vo,model,pair,tau" ] || fail "ranks header: [$(head -1 r99.csv)]"
[ "$(sed -n 2p r99.csv)" = "2,0,19,19,4,demo-r1-f32,vo,0.99" ] || fail "ranks row (tau from the setting): [$(sed -n 2p r99.csv)]"
[ "$(sed -n 2p r90.csv | cut -d, -f6-)" = "demo-r1-f32,vo,0.9" ] || fail "ranks row (tau given): [$(sed -n 2p r90.csv)]"
[ "$(head -1 r99.csv)" = "$(head -1 r90.csv)" ] || fail "the sweep's files share a header"
head -1 tr.csv | grep -q ",model,pair,tau,rank,policy$" && grep -q "^,.*,true,demo-r1-f32,vo,0.99,4,model-max$" tr.csv \
  || fail "truncate: rank and policy columns: [$(cat tr.csv)]"
grep -q "^layer,head,rank_q,rank_k,rank_qk,model,pair,tau$" out.txt || fail "format csv at the prompt: [$(cat out.txt)]"
[ "$(head -1 i.csv)" = "field,value" ] || fail "a record (info) gets no columns: [$(head -1 i.csv)]"
run -e "load demo-r1-f32; ranks vo layer 2 to plain.csv"
[ "$(head -1 plain.csv)" = "layer,head,rank_v,rank_o,rank_vo" ] || fail "csv.params off by default: [$(head -1 plain.csv)]"

# ---- item 8: file arguments, ppl's default window, aliases of local folders, help load lists aliases
mkdir -p ah
echo "mine $ATTNLAB_CACHE/demo-llama-v1" >ah/aliases
echo "gone ./no-such-folder" >>ah/aliases
"$B" -e "load demo-llama" >/dev/null 2>&1          # writes the demo into the cache
ATTNLAB_HOME="$T/ah" run -e "load mine; help load"
[ "$(rc)" = 0 ] && grep -q "^loaded mine: llama" out.txt || fail "alias of a local folder: [$(cat out.txt)] [$(cat err.txt)]"
grep -Eq "^  mine +$ATTNLAB_CACHE/demo-llama-v1$" out.txt && grep -Eq "^  ds-r1 +deepseek-ai/" out.txt || fail "help load lists the aliases: [$(cat out.txt)]"
ATTNLAB_HOME="$T/ah" run -e "load gone"
[ "$(rc)" = 1 ] && grep -q "alias 'gone' = ./no-such-folder: no such file or folder" err.txt || fail "alias to a missing folder: [$(cat err.txt)]"
M="${ATTNLAB_MODELS:-}"
if [ -n "$M" ] && [ -d "$M/stories260K-hf" ]; then
  cp -r "$M/stories260K-hf" short && sed -i 's/"max_position_embeddings": 512/"max_position_embeddings": 64/' short/config.json
  printf 'Once upon a time, there was a little girl named Lily. She liked to play outside in the park with her friends.\n%.0s' 1 2 3 4 5 >story.txt
  run -e "load short; ppl story.txt"
  [ "$(rc)" = 0 ] && grep -q "windows of up to 64 tokens" err.txt || fail "ppl default window min(512, context): [$(cat err.txt)]"
  run -e "load short; ppl story.txt seqlen 32"
  grep -q "windows of up to 32 tokens" err.txt || fail "ppl seqlen: [$(cat err.txt)]"
  run -e "load short; tokenize story.txt"
  [ "$(rc)" = 1 ] && grep -q "tokenize: 'story.txt' is a file: \`tokenize file story.txt\`" err.txt || fail "tokenize PATH: [$(cat err.txt)]"
  run -e "load short; tokenize file story.txt; tokenize \"story\""
  [ "$(rc)" = 0 ] && [ "$(wc -l <out.txt)" -ge 2 ] || fail "tokenize file / text: [$(cat out.txt)] [$(cat err.txt)]"
fi

cli_done
