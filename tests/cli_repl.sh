#!/usr/bin/env bash
# cli_repl.sh -- the prompt driven through a pipe: no prompt echo on stdout, a failing command
# prints its error and the session goes on, `quit` ends it, Lua errors keep it up, the exit
# status says whether any command failed.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-repl shared-cache
cd "$T" || exit 1

printf 'echo one\nbogus cmd\necho two\nset tau 0.5; set tau\nset lyer 3\nquit\necho after\n' | "$B" >out.txt 2>err.txt
rc=$?
[ "$rc" = 1 ] || fail "rc $rc, want 1 (a command failed)"
grep -q "attnlab>" out.txt err.txt && fail "prompt echoed"
[ "$(cat out.txt)" = "$(printf 'one\ntwo\ntau = 0.5\n0.5')" ] || fail "stdout: [$(cat out.txt)]"
grep -q "unknown command 'bogus'" err.txt || fail "no error for bogus: [$(cat err.txt)]"
grep -q "unknown setting 'lyer'" err.txt || fail "no error for set lyer: [$(cat err.txt)]"

printf 'echo fine\n' | "$B" >out.txt 2>err.txt
[ "$?" = 0 ] && [ "$(cat out.txt)" = fine ] && [ ! -s err.txt ] || fail "clean session: [$(cat out.txt)] [$(cat err.txt)]"

# Lua at the prompt: errors print a traceback and the session goes on
printf 'lua error("boom")\necho alive\n= 1+)\n= 1+1\nlua x = 5\n= x * 2\nlua for i = 1, 3 do print(i) end\n' | "$B" >out.txt 2>err.txt
[ "$(cat out.txt)" = "$(printf 'alive\n2\n10\n1\n2\n3')" ] || fail "lua session stdout: [$(cat out.txt)]"
grep -q "boom" err.txt && grep -q "stack traceback" err.txt || fail "no traceback: [$(cat err.txt)]"
grep -q "unexpected symbol" err.txt || fail "no syntax error: [$(cat err.txt)]"

# Lua spread over several lines: the shell reads on while the chunk is incomplete
printf 'lua function twice(x)\n  return x * 2\nend\n= twice(21)\n= {1,\n2}\nlua for i = 1, 2 do\n' | "$B" >out.txt 2>err.txt
[ "$?" = 1 ] || fail "unfinished Lua at end of input should fail"
[ "$(cat out.txt)" = "$(printf '42\n{1, 2}')" ] || fail "multi-line Lua: [$(cat out.txt)] [$(cat err.txt)]"
grep -q "'end' expected near <eof>" err.txt || fail "unfinished chunk error: [$(cat err.txt)]"

# a command failing inside Lua is a Lua error; results come back as values
printf '= attn.run("set tau 0.25; set tau")\n= pcall(attn.use, "nope")\n= #attn.run("set")\n= attn.run("set")[1].setting\n' | "$B" >out.txt 2>err.txt
[ "$(sed -n 1p out.txt)" = "0.25" ] || fail "attn.run value (set is silent from Lua): [$(cat out.txt)]"
grep -q "^false	attn.use: no model named 'nope'" out.txt || fail "pcall error: [$(cat out.txt)]"
[ "$(sed -n 3p out.txt)" = "8" ] && [ "$(sed -n 4p out.txt)" = "tau" ] || fail "set as rows: [$(cat out.txt)]"

# output formats
printf 'set format csv\nset\nset format json\nhistory 0\n' | "$B" >out.txt 2>err.txt
grep -q "^setting,value,help$" out.txt || fail "csv format: [$(cat out.txt)]"

# Ctrl-D / end of input without quit ends the session normally
printf 'echo x' | "$B" >out.txt 2>err.txt
[ "$?" = 0 ] && [ "$(cat out.txt)" = x ] || fail "last line without newline"

cli_done
