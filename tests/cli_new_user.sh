#!/usr/bin/env bash
# cli_new_user.sh -- the smaller wrong answers a new user met at the prompt (rev's review, fixed by ux in s14):
# echo's quotes, info's doubled "no: compare:", help lines with two defaults, and (below) plurals and Lua counts.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-new-user shared-cache
cli_need_model stories260K-hf/model.safetensors

# echo reads its text as every command reads an argument: quotes removed, "..."'s escapes applied
out=$(e 'echo "a b"')
ok "echo \"a b\" prints a b [$out]" test "$out" = "a b"
out=$(e "echo 'c  d' e")
ok "echo 'c  d' e prints c  d e [$out]" test "$out" = "c  d e"
out=$(e 'echo x "y z" w; echo "t\tu"')
ok "echo x \"y z\" w; echo \"t\\tu\": two lines, the tab read [$out]" test "$out" = "$(printf 'x y z w\nt\tu')"
out=$(e 'echo "open')
ok "echo \"open: an unterminated quote is an error, as for any command" has "$out" "unterminated double quote"
out=$(e 'echo "a;b" c; echo d')
ok "echo: a quoted ; stays, an unquoted one ends the command [$out]" test "$out" = "$(printf 'a;b c\nd')"

# info's analysis rows say "no: REASON" once
out=$(e "load demo-r1; info")
ok "info: the compare row is not 'no: compare: ...'" hasnt "$out" "no: compare:"
ok "info: the compare row says why" has "$out" "^compare  *no: demo-r1 is MLA"

# help: one default per argument line (a help text that states its default gets no second one)
cmds=$(e "help" | awk '/^  [a-z]/ { print $1 }')
twice=""
for c in $cmds; do
    subs=$(e "help $c" | awk '/^sub-commands/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
    for w in "$c" $(for s in $subs; do echo "$c:$s"; done); do
        h=$(e "help ${w/:/ }")
        grep -q "(default.*(default" <<<"$h" && twice="$twice ${w/:/ }"
    done
done
ok "no help line gives two defaults [${twice:-none}]" test -z "$twice"
out=$(e "help check")
ok "help check: the tokens line says the conversion's tokens, 64 where none was recorded" \
    has "$out" "default: the conversion's, as its report drew them; 64 where it recorded none"
# Lua: every count a command returns is a Lua integer (math.type "integer"), means of counts too when whole
cat >counts.lua <<'LUA'
local bad, seen = {}, 0
local function count_key(k)
    if k:match("err") or k:match("ppl") or k:match("energy") or k:match("scale") then return false end
    for _, w in ipairs({"layer", "head", "token", "values", "^kv", "rank", "params", "count", "experts", "bytes",
                        "window", "dims", "hidden", "rows", "seqlen", "before", "after"}) do
        if k:match(w) then return true end
    end
    return false
end
local function walk(v, path)
    if type(v) == "table" then
        for k, x in pairs(v) do walk(x, path .. "." .. tostring(k)) end
    elseif type(v) == "number" then
        local key = path:match("([%w_]+)$") or ""
        if count_key(key) or key:match("^token_ids") or path:match("^tokenize") then
            seen = seen + 1
            if math.type(v) ~= "integer" and v == math.floor(v) then bad[#bad + 1] = path .. "=" .. v end
        end
    end
end
attn.load("demo-llama")
walk(attn.info(), "info")
walk(attn.ranks("vo", {layer = "all"}), "ranks")
local t, total = attn.truncate("vo", {rank = 4})
walk(t, "truncate"); walk(total, "truncate.total")
walk(attn.kv_cache(), "kv_cache")
walk(attn.kv_cache({context = 100}), "kv_cache_context")
walk(attn.compare({["kv-budget"] = 64}), "compare")
walk(attn.ranks("vo", {layer = "all", summary = true}), "ranks_summary")
attn.load(os.getenv("ATTNLAB_MODELS") .. "/stories260K-hf")
walk({token_ids = attn.tokenize("Once upon a time")}, "tokenize")
print(string.format("counts seen %d; floats where integers belong: %s", seen, #bad > 0 and table.concat(bad, " ") or "none"))
LUA
"$B" counts.lua >out.txt 2>err.txt
out=$(cat out.txt err.txt)
ok "Lua: counts were returned [$(grep -o 'counts seen [0-9]*' <<<"$out")]" has "$out" "counts seen [1-9][0-9]"
ok "Lua: every count is an integer [$(grep -o 'belong: .*' <<<"$out" | cut -c1-300)]" has "$out" "floats where integers belong: none"
# counts print the singular for one (al_s): "1 layer", "1 KV head", "1 token"
run -e "synth demo-llama base"
ok "synth demo-llama" test "$(rc)" = 0
for d in one:1:2 kv1:4:1; do
    IFS=: read -r name layers kv <<<"$d"
    cp -r base "$name"
    python3 - "$name" "$layers" "$kv" <<'PY'
import json, sys
d, layers, kv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = json.load(open(f"{d}/config.json")); c["num_hidden_layers"] = layers; c["num_key_value_heads"] = kv
json.dump(c, open(f"{d}/config.json", "w"), indent=1)
PY
done
echo 5 >one_id.txt
out=$(e "load one")
ok "load: 1 layer [$out]" has "$out" "^loaded one: llama, 1 layer, 8 heads (2 KV)"
out=$(e "load one; ppl ids one_id.txt")
ok "ppl: has 1 token [$out]" has "$out" "one_id.txt has 1 token; at least 2"
out=$(e "load kv1")
ok "a 1-KV-head config: 1 KV head [$out]" has "$out" "8 heads, 1 KV head, hidden 256"

# run: a missing Lua file is an error of the shell's, as a missing command file is
out=$(e "run /nonexistent-ux.lua")
ok "run FILE.lua: a missing file says error: run: cannot open [$out]" has "$out" "^error: run: cannot open '/nonexistent-ux.lua'"

# a table's `to FILE` with another extension is refused before the command's work
out=$(e "load demo-llama; ranks vo all to r.txt")
ok "ranks ... to r.txt: the error" has "$out" "^error: cannot write a table to 'r.txt': the extension '.txt'"
ok "  before the ranks were computed" hasnt "$out" "effective ranks"
cli_done
