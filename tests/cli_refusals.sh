#!/usr/bin/env bash
# cli_refusals.sh -- what used to do nothing and say nothing (issue 14, 15): `run DIR` and
# `attnlab DIR` are errors; `set plot.size` below what a figure can be drawn at is refused;
# piped input interrupted while idle exits non-zero saying the rest was not run; a second Ctrl-C
# while a first is pending in a long Lua C call (a pattern match) ends the process, as lua.c does.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-refusals
cd "$T" || exit 1

mkdir d
run -e "run d"
[ "$(rc)" = 1 ] && grep -q "run: 'd' is a folder" err.txt || fail "run DIR: rc $(rc) [$(cat err.txt)]"
run d
[ "$(rc)" = 1 ] && grep -q "'d' is a folder" err.txt || fail "attnlab DIR: rc $(rc) [$(cat err.txt)]"
run -e "set plot.size 16x16"
[ "$(rc)" = 1 ] && grep -q "width 200-10000 and height 150-10000" err.txt || fail "plot.size 16x16: rc $(rc) [$(cat err.txt)]"
run -e "set plot.size 200x150; set plot.size"
[ "$(rc)" = 0 ] && grep -q "200x150" out.txt || fail "plot.size 200x150: rc $(rc) [$(cat err.txt)]"

# piped input, Ctrl-C while attnlab waits for the next line: non-zero, the rest not run
mkfifo in.fifo
"$B" <in.fifo >p.out 2>p.err &
pid=$!
exec 3>in.fifo
echo "echo one" >&3
sleep 1
kill -INT "$pid"
sleep 0.5
wait "$pid"
st=$?
exec 3>&-
[ "$st" != 0 ] || fail "piped SIGINT while idle: exit 0"
grep -qx "one" p.out && grep -q "interrupted: the rest of the input was not run" p.err \
    || fail "piped SIGINT: [$(cat p.out)] [$(cat p.err)]"

# a pattern match that backtracks for ages: the first Ctrl-C cannot stop it, the second ends it
"$B" -e 'lua string.find(string.rep("a", 36), string.rep("a?", 36) .. string.rep("a", 36) .. "b")' >l.out 2>l.err &
pid=$!
sleep 1
kill -INT "$pid"
sleep 0.5
kill -0 "$pid" 2>/dev/null || fail "the match ended at the first Ctrl-C (pick a slower pattern)"
kill -INT "$pid"
for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
if kill -0 "$pid" 2>/dev/null; then
    fail "a second Ctrl-C did not end the Lua C call"
    kill -KILL "$pid"
fi
wait "$pid"
st=$?
[ "$st" = 130 ] || fail "second Ctrl-C: status $st, want 130 (killed by SIGINT) [$(cat l.err)]"
cli_done
