#!/bin/bash
# cli_output.sh -- issue 25, item 7 (output a paper can use), on stories260K-hf and the demos:
#   csv    `set format csv` (and json): stdout holds the results alone -- status lines, headlines
#          and help go to stderr -- so `attnlab -e ... | pandas` reads it; `spectrum` and `echo`
#          stay on stdout; `info` in JSON is one object keyed by field;
#   total  a table's totals row keeps each column one type in CSV and JSON: its label cell empty /
#          null and a bool column `total` (true on that row only); Lua still gets it as a 2nd value;
#   ranks  `ranks ... layers A-B` like every other command; the headline names the model;
#   kv     `kv-cache` lists a FaRR truncation: values per token per layer, bytes, parameters;
#   dym    "did you mean" for settings, setting values and model names (use, close, model NAME,
#          load);
#   help   every command that returns a value says what Lua gets (spectrum: rows, not an array;
#          all 67 commands and sub-commands walked); `export FILE.gguf` returns the file like the
#          other exports;
#   gguf   `lint FILE.gguf` speaks of GGUF: architecture, llama.cpp, the folder engines "not its
#          format".
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-output shared-cache
cd "$T" || exit 1
cli_need_model stories260K-hf/config.json
M="$M/stories260K-hf"

# ---- csv: stdout is the CSV alone, every row as wide as the header
run -e "set format csv; load $M; ranks vo layers 1-2"
ok "csv: exits 0" test "$(rc)" = 0
ok "csv: stdout starts with the header" test "$(head -1 out.txt)" = "layer,head,rank_v,rank_o,rank_vo"
ok "csv: 16 rows of layers 1-2 and nothing else" test "$(wc -l <out.txt)" = 17
ok "csv: every line 5 fields" test "$(awk -F, 'NF != 5' out.txt | wc -l)" = 0
ok "csv: only layers 1 and 2" test "$(tail -n +2 out.txt | cut -d, -f1 | sort -u | tr '\n' ' ')" = "1 2 "
ok "csv: the load line went to stderr" has "$(cat err.txt)" "^loaded stories260K-hf"
ok "csv: the headline went to stderr and names the model" \
  has "$(cat err.txt)" "^stories260K-hf: VO effective ranks at tau 0.999, layers 1-2: "
ok "csv: 'set format csv' itself on stderr" has "$(cat err.txt)" "^format = csv"
run -e "set format csv; load $M; spectrum vo layer 1 head 0; echo END"
ok "csv: spectrum's table is stdout's first line" test "$(head -1 out.txt)" = "index,sigma,energy"
ok "csv: spectrum's 8 rows then echo" test "$(wc -l <out.txt)" = 10 -a "$(tail -1 out.txt)" = "END"
ok "csv: spectrum's headline on stderr" has "$(cat err.txt)" "effective rank"
run -e "set format json; load $M; ranks vo layer 0"
ok "json: stdout is one JSON array" test "$(head -c1 out.txt)$(tail -c2 out.txt | head -c1)" = "[]"
if command -v python3 >/dev/null; then
  python3 -c "import json; d=json.load(open('out.txt')); assert len(d) == 8 and d[0]['layer'] == 0" \
    || fail "json: parses, 8 rows: [$(cat out.txt)]"
fi
run -e "set format json; load $M; set precision"
ok "json: a value result is on stdout alone" test "$(cat out.txt)" = "6"
run -e "set format json; load $M; info"
ok "json: info is one object keyed by field, as info to FILE.json" has "$(cat out.txt)" '"kv_bytes_per_token":[[:space:]]*1280'
ok "json: info is not field/value rows" hasnt "$(cat out.txt)" '"field":'

# ---- total: one type per column
run -e "load $M; truncate vo rank 4 to tr.csv; truncate vo rank 4 to tr.json; set format json; truncate vo rank 4"
ok "total: exits 0" test "$(rc)" = 0
ok "total: csv header ends with total" test "$(head -1 tr.csv | awk -F, '{print $NF}')" = "total"
ok "total: csv layer rows say false" test "$(sed -n 2p tr.csv | cut -d, -f1,11)" = "0,false"
ok "total: csv totals row: empty label, 15360 parameters after, true" \
  test "$(tail -1 tr.csv | cut -d, -f1,5,11)" = ",15360,true"
hasnt "$(cat tr.json out.txt)" '"layer": "total"' || fail "total: a string among the layer numbers: [$(cat tr.json)]"
ok "total: json totals row" has "$(tail -2 out.txt)" '{"layer": null, "rank_min": 4, .*"total": true}'
if command -v python3 >/dev/null; then
  python3 - <<'PY' || fail "total: a column with two types in tr.json"
import json
rows = json.load(open("tr.json"))
for k in rows[0]:
    kinds = {type(r[k]).__name__ for r in rows if r[k] is not None}
    kinds = {"number" if x in ("int", "float") else x for x in kinds}
    assert len(kinds) == 1, (k, kinds)
assert [r["total"] for r in rows] == [False] * 5 + [True]
PY
fi
cat >t.lua <<LUA
attn.load("$M")
local rows, total = attn.truncate("vo", {rank = 4})
assert(#rows == 5 and total.params_after == 15360 and total.layer == nil, "lua totals")
local sp = attn.spectrum("vo", {layer = 1, head = 0})
assert(#sp == 8 and type(sp[1].sigma) == "number" and sp[1].index == 1, "spectrum rows")
assert(type(attn.export("s.gguf")) == "string", "export FILE.gguf returns the file")
print("lua ok")
LUA
run t.lua
ok "lua: totals, spectrum rows, gguf export value" has "$(cat out.txt)" "lua ok"
[ "$(rc)" = 0 ] || fail "lua: [$(cat err.txt)]"

# ---- ranks: layers A-B and the headline
out=$(e "load $M; ranks vo layers 3-4 summary")
ok "ranks layers 3-4: the headline names the model and the layers" \
  has "$out" "^stories260K-hf: VO effective ranks at tau 0.999, layers 3-4: fused 8-8 (mean 8.0) of 8, 16 heads"
out=$(e "load $M; ranks vo 1 layers 2")
ok "ranks: a range and layers A-B refused together" has "$out" "give one of a range"

# ---- kv: FaRR truncations in kv-cache
run -e "load $M; truncate vo rank 4; kv-cache to kv.csv"
ok "kv: exits 0" test "$(rc)" = 0
ok "kv: the truncate row (64 -> 48 values, 192 bytes, 9216 parameters per layer)" \
  test "$(grep '^"*truncate (VO: V 4 dims per KV head in layers 0-4; K+V per token per layer 64 -> 48,' kv.csv | awk -F, '{print $(NF-2) "," $(NF-1) "," $NF}')" = "48,192,9216"
out=$(e "load $M; truncate vo rank 4 layers 1-2; kv-cache")
ok "kv: a partial truncation is the mean over the layers" has "$out" "64 -> 57.6, mean over 5 layers; 1152 bytes per token"
out=$(e "load demo-r1; truncate vo rank 4; kv-cache")
ok "kv: MLA's cache is the latent" has "$out" "truncate (VO: rank 4 in layers 0-5; MLA caches the latent: unchanged;"

# ---- dym: did you mean
ok "dym: set KEY" has "$(e "set formt csv")" "unknown setting 'formt' (did you mean 'format'?)"
ok "dym: set VALUE" has "$(e "set format cvs")" "did you mean 'csv'?"
ok "dym: set KEY (read)" has "$(e "set precison")" "did you mean 'precision'?"
ok "dym: use" has "$(e "load $M; use stories260k-hf")" "no model named 'stories260k-hf' (did you mean 'stories260K-hf'?)"
ok "dym: close" has "$(e "load $M; close storie260K-hf")" "did you mean 'stories260K-hf'?"
ok "dym: model NAME" has "$(e "load $M; ranks vo model stories260K-h")" "did you mean 'stories260K-hf'?"
ok "dym: load a demo" has "$(e "load demo-lama")" "model 'demo-lama' not found (did you mean 'demo-llama'?)"
ok "dym: load a demo variant" has "$(e "load demo-r1-bf61")" "did you mean 'demo-r1-bf16'?"
ok "dym: nothing close, no suggestion" hasnt "$(e "load zzqqxx")" "did you mean"

# ---- help: what Lua gets
h=$(e "help spectrum")
ok "help spectrum: the rows it returns" has "$h" "{index, sigma, energy}"
ok "help spectrum: not an array" hasnt "$h" "array of singular values"
for c in load models transforms export tokenizer generate synth "diff ranks" "plot spectrum" "synth family" \
         truncate ppl kv-cache fused calibrate "kvsvd learn" "convert mla" "convert mla-table"; do
  ok "help $c says what Lua gets" has "$(e "help $c")" "Lua"
done
# every command and sub-command but the hubs and the front end's no-value ones
quiet=" diff convert save calib undo echo history exit quit "
missing=""
for c in $(e help | awk '/^  [a-z]/{print $1}'); do
  subs=$(e "help $c" | sed -n '/^sub-commands/,$p' | awk 'NR > 1 {print $1}')
  for s in "" $subs; do
    case "$quiet" in *" $c "*) [ -z "$s" ] && continue ;; esac
    e "help $c $s" | grep -qi "lua\|attn\." || missing="$missing [$c $s]"
  done
done
ok "help: every command says what Lua gets (missing:$missing)" test -z "$missing"

# ---- gguf: lint speaks of GGUF
out=$(e "lint s.gguf")
ok "gguf: the header" has "$out" "^lint s.gguf: GGUF file for llama.cpp, architecture llama, 47 tensors: 0 errors"
ok "gguf: no model_type talk" hasnt "$out" "model_type"
ok "gguf: transformers reads folders" has "$out" "^transformers  -  *not its format"
ok "gguf: llama.cpp loads it" has "$out" "^llama.cpp  *llama (GGUF)  *loads"
ok "gguf: help describes it" has "$(e "help lint")" "A FILE.gguf is checked for llama.cpp"

cli_done
