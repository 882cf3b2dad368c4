#!/usr/bin/env bash
# cli_lua.sh -- Lua notebooks: `attnlab FILE.lua args` with `arg`, module attn calling commands
# and getting tables back, keyword tables and flags, errors as Lua errors, a Lua error's
# traceback and exit status, `run FILE.lua`, and command files with file:line: errors.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-lua shared-cache
cd "$T" || exit 1

cat >nb.lua <<'LUA'
assert(arg[0] == "nb.lua" and arg[1] == "x y" and arg[2] == "7", "arg: " .. tostring(arg[1]))
local a, b = ...
assert(a == "x y" and b == "7", "varargs")
assert(require("attn") == attn)
-- settings: typed call, keyword of set is positional here
attn.set("tau", 0.99)
assert(attn.set("tau") == "0.99", "tau " .. tostring(attn.set("tau")))
-- errors from commands are Lua errors with the command's message
local ok, err = pcall(attn.use, "nope")
assert(not ok and err:find("attn.use: no model named 'nope'", 1, true), err)
ok, err = pcall(attn.run, "set lyer 3")
assert(not ok and err:find("unknown setting 'lyer'", 1, true), err)
ok, err = pcall(attn.run, "frob")
assert(not ok and err:find("unknown command 'frob'", 1, true), err)
ok, err = pcall(attn.quit)
assert(not ok and err:find("not available from Lua", 1, true), err)
ok, err = pcall(attn.models, {lyer = 3})
assert(not ok and err:find("unexpected argument 'lyer'", 1, true), err)
-- a table result is an array of rows keyed by column
local rows = attn.run("set")
assert(#rows == 8 and rows[1].setting == "tau" and rows[1].value == "0.99", "set rows")
print("models", #attn.models())
local m = os.getenv("MODEL")
if m then
  local name = attn.load(m, {as = "tiny"})
  assert(name == "tiny", "load returns the name: " .. tostring(name))
  local info = attn.info()
  assert(attn.info().layers == 5, "attn.info() keyed by field")
  assert(info.layers == 5 and math.type(info.layers) == "integer" and info.heads == 8, "info rows")
  assert(info.family == "llama" and info.qkv_bias == false and info.rope_theta == 10000.0, "info types")
  local ms = attn.models({to = "m.json"})
  assert(#ms == 1 and ms[1].name == "tiny" and ms[1].current == true and ms[1].layers == 5, "models rows")
  local f = assert(io.open("m.json")); local txt = f:read("a"); f:close()
  assert(txt:find('"name": "tiny"', 1, true), "models to m.json")
  attn.close("all")
  assert(#attn.models() == 0)
  print("model ok")
end
print("done")
LUA
M="${ATTNLAB_MODELS:-}/stories260K-hf"
if [ -d "$M" ]; then export MODEL="$M"; fi

"$B" nb.lua "x y" 7 >out.txt 2>err.txt
rc=$?
[ "$rc" = 0 ] || fail "notebook: rc $rc: $(cat err.txt)"
grep -q "^models	0$" out.txt && grep -q "^done$" out.txt || fail "notebook output: [$(cat out.txt)]"
if [ -n "${MODEL:-}" ]; then grep -q "^model ok$" out.txt || fail "model part: [$(cat out.txt)]"; fi
grep -q "wrote 1 row to m.json" out.txt || [ -z "${MODEL:-}" ] || fail "to m.json not reported"

# a Lua error: traceback on stderr, exit status 1
printf 'local function f() error("deep trouble") end\nf()\n' >bad.lua
"$B" bad.lua >out.txt 2>err.txt
[ "$?" = 1 ] || fail "bad.lua: rc"
grep -q "bad.lua:1: deep trouble" err.txt && grep -q "stack traceback" err.txt && grep -q "in local 'f'\|in function 'f'\|in upvalue 'f'" err.txt \
    || fail "bad.lua traceback: [$(cat err.txt)]"

# run FILE.lua from the prompt; the session keeps its Lua state
printf 'counter = (counter or 0) + 1\nprint("run", counter)\n' >inc.lua
printf 'run inc.lua\nrun inc.lua\n= counter\n' | "$B" >out.txt 2>err.txt
[ "$(cat out.txt)" = "$(printf 'run\t1\nrun\t2\n2')" ] || fail "run FILE.lua: [$(cat out.txt)] [$(cat err.txt)]"

# a command file: stops at the first failing line, reported as file:line:
printf '# comment\necho first\n\nset tau 0.5; echo second\nset tau nope\necho never\n' >cmds.txt
"$B" cmds.txt >out.txt 2>err.txt
[ "$?" = 1 ] || fail "cmds.txt: rc"
[ "$(cat out.txt)" = "$(printf 'first\ntau = 0.5\nsecond')" ] || fail "cmds.txt stdout: [$(cat out.txt)]"
grep -q "^cmds.txt:5: set tau: 'nope'" err.txt || fail "cmds.txt error: [$(cat err.txt)]"
[ "$(grep -c cmds.txt err.txt)" = 1 ] || fail "error reported twice: [$(cat err.txt)]"
printf 'echo a\nset tau lyer\n' >c2.txt
"$B" -e "run c2.txt; echo not-here" >out.txt 2>err.txt
[ "$?" = 1 ] && grep -q "^c2.txt:2: set tau" err.txt && ! grep -q not-here out.txt || fail "run c2.txt: [$(cat out.txt)] [$(cat err.txt)]"
printf 'echo a\nset tau 0.5 extra\n' >c3.txt
"$B" c3.txt >out.txt 2>err.txt
grep -q "^c3.txt:2:13: unexpected argument 'extra'" err.txt || fail "parse error in file: [$(cat err.txt)]"

# attn.quiet drops narration but keeps results
printf 'assert(attn.quiet(true) == false)\nassert(attn.set("tau", 0.5) == nil)\nprint(attn.set("tau"))\nattn.quiet(false)\nattn.set("tau", 0.75)\n' >q.lua
"$B" q.lua >out.txt 2>err.txt
[ "$(cat out.txt)" = "0.5" ] || fail "quiet, and attn.set silent in notebooks: [$(cat out.txt)] [$(cat err.txt)]"
# attn.get reads a setting, typed; attn.get() all of them
cat >g.lua <<'LUA'
assert(attn.get("tau") == 0.999 and math.type(attn.get("precision")) == "integer", "attn.get typed")
attn.set("tau", 0.123456789)
assert(attn.get("tau") == 0.123456789, "attn.get full precision")
local all = attn.get()
assert(all.format == "table" and all["plot.size"] == "1200x800" and all.tau == 0.123456789, "attn.get()")
assert(not pcall(attn.get, "lyer"), "attn.get of an unknown setting")
local ok, msg = pcall(attn.get, "lyer")
assert(msg:find("unknown setting 'lyer'", 1, true), msg)
print("get ok")
LUA
"$B" g.lua >out.txt 2>err.txt
[ "$(cat out.txt)" = "get ok" ] || fail "attn.get: [$(cat out.txt)] [$(cat err.txt)]"
# at the prompt set still says the new value
"$B" -e "set tau 0.75" >out.txt 2>err.txt
[ "$(cat out.txt)" = "tau = 0.75" ] || fail "set at the prompt: [$(cat out.txt)]"

# the example notebook runs on the demo models
"$B" "$ATTNLAB_SRC/scripts/info_demos.lua" demo-llama demo-gpt2 >out.txt 2>err.txt
[ "$?" = 0 ] || fail "info_demos.lua: $(cat err.txt)"
grep -Eq "^KV values/token/layer +128 +512$" out.txt || fail "info_demos.lua output: [$(cat out.txt)]"
grep -q "2 models loaded; current: demo-gpt2" out.txt || fail "info_demos.lua models: [$(cat out.txt)]"

cli_done
