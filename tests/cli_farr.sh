#!/usr/bin/env bash
# cli_farr.sh -- the FaRR commands end to end on the demo models: exact CSV headers and planted
# ranks (core/methods/synth.c), spectrum CSV, the RoPE refusal and offset, truncate reports, export +
# reload round trip and refusals, Lua values, and the seed-cases notebook.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-farr shared-cache
cd "$T" || exit 1

# ---- ranks: exact headers, planted ranks of demo-r1 (VO layer 2 fused-low r=4; QK layer 3 staircase)
"$B" -e "load demo-r1; ranks vo layer 2 to vo2.csv; ranks qk 3 to qk3.csv; ranks vo all to all.csv" >out.txt 2>err.txt \
  || fail "ranks exited $?: $(cat err.txt)"
[ "$(head -1 vo2.csv)" = "layer,head,rank_v,rank_o,rank_vo" ] || fail "vo header: $(head -1 vo2.csv)"
[ "$(head -1 qk3.csv)" = "layer,head,rank_q,rank_k,rank_qk" ] || fail "qk header: $(head -1 qk3.csv)"
[ "$(tail -n +2 vo2.csv | cut -d, -f5 | sort -u)" = "4" ] || fail "layer 2 fused ranks: $(cat vo2.csv)"
[ "$(tail -n +2 vo2.csv | cut -d, -f3 | sort -u)" = "31" ] || fail "layer 2 V ranks"
want=$(printf '%s\n' 2 4 6 8 10 12 14 16)
[ "$(tail -n +2 qk3.csv | cut -d, -f5)" = "$want" ] || fail "qk staircase: $(cut -d, -f5 qk3.csv | tr '\n' ' ')"
[ "$(wc -l <all.csv)" -eq 49 ] || fail "ranks vo all: $(wc -l <all.csv) lines"
grep -q "wrote 8 rows to vo2.csv" out.txt || fail "no 'wrote' line: $(cat out.txt)"

# ---- a different tau is not stale: V ranks at 0.99 differ from 0.999
"$B" -e "load demo-r1-f32; ranks vo layer 2 tau 0.99 to v99.csv; set tau 0.999; ranks vo layer 2 to v999.csv" >/dev/null 2>err.txt \
  || fail "tau: $(cat err.txt)"
[ "$(tail -n +2 v99.csv | cut -d, -f3 | sort -u)" = "19" ] || fail "V rank at 0.99: $(cat v99.csv)"
[ "$(tail -n +2 v999.csv | cut -d, -f3 | sort -u)" = "31" ] || fail "V rank at 0.999"

# ---- spectrum CSV
"$B" -e "load demo-r1; spectrum vo layer 2 head 0 to s.csv" >out.txt 2>err.txt || fail "spectrum: $(cat err.txt)"
[ "$(head -1 s.csv)" = "index,sigma,energy" ] || fail "spectrum header: $(head -1 s.csv)"
[ "$(wc -l <s.csv)" -eq 33 ] || fail "spectrum rows: $(wc -l <s.csv)"
[ "$(sed -n 2p s.csv | cut -d, -f1)" = "1" ] || fail "1-based index"
awk -F, 'NR == 33 { if ($3 < 0.999999 || $3 > 1.000001) exit 1 }' s.csv || fail "last energy is 1: $(tail -1 s.csv)"
grep -q "effective rank 4 at tau 0.99, 4 at tau 0.999" out.txt || fail "spectrum ranks line: $(cat out.txt)"

# ---- full RoPE: refused with the reason, allowed with an offset
if "$B" -e "load demo-llama; ranks qk layer 0" >/dev/null 2>err.txt; then fail "llama qk not refused"; fi
grep -q "seed 000, A.3" err.txt || fail "refusal reason: $(cat err.txt)"
"$B" -e "load demo-llama; ranks qk layer 0 offset 5 to off.csv" >/dev/null 2>err.txt || fail "offset: $(cat err.txt)"
[ "$(wc -l <off.csv)" -eq 9 ] || fail "offset rows"
if "$B" -e "load demo-llama; truncate qk tau 0.99" >/dev/null 2>err.txt; then fail "llama qk truncate not refused"; fi

# ---- truncate + export + reload
"$B" -e "load demo-r1-f32; truncate vo rank 4 policy model-max to tr.csv; truncate qk rank 8 policy model-max; export out1" \
  >out.txt 2>err.txt || fail "truncate/export: $(cat err.txt)"
[ "$(head -1 tr.csv)" = "layer,rank_min,rank_max,params_before,params_after,energy_min,energy_mean,vo_err_max,kv_before,kv_after,total" ] \
  || fail "truncate header: $(head -1 tr.csv)"
grep -q "^,4,4,638976,79872,.*,true$" tr.csv || fail "truncate totals: $(tail -1 tr.csv)"
grep -q "format hf" out.txt || fail "export format: $(cat out.txt)"
[ -f out1/farr_manifest.json ] && [ -f out1/config.json ] && [ -f out1/model.safetensors.index.json ] || fail "export files: $(ls out1)"
grep -q '"v_head_dim":[[:space:]]*4' out1/config.json || fail "v_head_dim in config"
"$B" -e "load out1; ranks vo layer 2 to re.csv" >/dev/null 2>err.txt || fail "reload: $(cat err.txt)"
[ "$(tail -n +2 re.csv | cut -d, -f5 | sort -u)" = "4" ] || fail "reloaded fused ranks: $(cat re.csv)"
if "$B" -e "load demo-r1-f32; truncate vo rank 4 policy model-max; export out1" >/dev/null 2>err.txt; then
  fail "export into a non-empty folder not refused"; fi
grep -q "not empty" err.txt || fail "non-empty message: $(cat err.txt)"
"$B" -e "load demo-r1-f32; truncate vo rank 4 policy model-max; export out1 force" >/dev/null 2>err.txt || fail "force: $(cat err.txt)"
if "$B" -e "load demo-llama; truncate vo tau 0.999; export outl format hf" >/dev/null 2>err.txt; then fail "llama hf not refused"; fi
grep -q "use format factors" err.txt || fail "hf refusal: $(cat err.txt)"
"$B" -e "load demo-llama; truncate vo tau 0.999 layers 1-2; export outl" >out.txt 2>err.txt || fail "llama factors: $(cat err.txt)"
[ -f outl/farr/factors.safetensors ] || fail "no factors file"
if "$B" -e "load demo-r1; export out2" >/dev/null 2>err.txt; then fail "export without truncate"; fi
grep -q "nothing to export" err.txt || fail "no-plan message: $(cat err.txt)"

# ---- argument errors point at the argument
if "$B" -e "load demo-r1; truncate vo tau 0.9 rank 3" >/dev/null 2>err.txt; then fail "tau+rank accepted"; fi
grep -q "not both" err.txt || fail "tau+rank message: $(cat err.txt)"
if "$B" -e "load demo-r1; ranks vx layer 2" >/dev/null 2>err.txt; then fail "bad pair accepted"; fi
grep -q "did you mean 'vo'" err.txt || fail "pair message: $(cat err.txt)"

# ---- Lua values
cat >nb.lua <<'LUA'
attn.load("demo-r1")
local r = attn.run("ranks vo layer 2")
assert(#r == 8 and r[1].layer == 2 and r[1].head == 0 and r[1].rank_v == 31 and r[1].rank_vo == 4, "ranks rows")
local s = attn.spectrum("vo", {layer = 2, head = 0})
assert(#s == 32 and s[1].sigma >= s[2].sigma and s[5].sigma < 0.01 * s[1].sigma, "spectrum rows")
assert(s[1].index == 1 and s[32].energy > 0.999999 and s[1].energy < s[2].energy, "spectrum: every column")
local q = attn.ranks("qk", {layer = 3})
assert(q[8].rank_qk == 16 and q[8].rank_k == 16, "qk rows")
local f = attn.fuse("vo", {layer = 1, head = 0})
assert(#f == 32, "fuse returns sigma")
local u = attn.fused("u", {index = 1})
local n = 0
for _, x in ipairs(u) do n = n + x * x end
assert(#u == 96 and math.abs(n - 1) < 1e-6, "unit left vector")
local t, total = attn.truncate("vo", {tau = 0.999, layers = "1-3"})
assert(#t == 3 and t[3].layer == 3 and t[1].rank_min == 6 and t[1].rank_max == 32, "truncate rows")
assert(total.layer == nil and total.rank_min == 3 and total.rank_max == 32 and total.params_before > total.params_after, "truncate totals")
print("lua ok")
LUA
"$B" nb.lua >out.txt 2>err.txt || fail "notebook: $(cat err.txt)"
grep -q "lua ok" out.txt || fail "lua: $(cat out.txt)"

# ---- the seed-cases notebook
"$B" "$ATTNLAB_SRC/scripts/farr_cases.lua" >cases.txt 2>err.txt || fail "farr_cases.lua: $(cat err.txt)"
grep -q "Case 1: the bottleneck effect.*-- layer 1" cases.txt || fail "case 1: $(cat cases.txt)"
grep -q "Case 2: only low when fused.*-- layer 2" cases.txt || fail "case 2"
grep -q "The common case: high-rank layers.*-- layer 0" cases.txt || fail "case 3"

# ---- lint the exports (issue 13, 4): the hf export of the MLA demo and the factors export of the
# Llama demo keep their family's layout; transformers, vLLM and SGLang load them (no tokenizer in the
# demos: llama.cpp's converter refuses)
for d in out1:DeepseekV3ForCausalLM outl:LlamaForCausalLM; do
  "$B" -e "lint ${d%%:*}" >out.txt 2>err.txt || fail "lint ${d%%:*}: $(cat err.txt)"
  [ "$(grep -Ec "^(transformers|vLLM|SGLang) +${d#*:} +loads( with --skip-tokenizer-init .*)? *$" out.txt)" = 3 ] && grep -q ": 1 error, 1 warning" out.txt \
    && grep -q "llama.cpp: no tokenizer files" out.txt || fail "lint ${d%%:*}: [$(cat out.txt)]"
done

cli_done
