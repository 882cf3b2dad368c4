#!/bin/bash
# cli_info.sh -- `info` lists, per analysis, whether it is available on the model and why not
# (table rows and one JSON key per analysis), and a YaRN-scaled GQA model (demo-llama with
# rope_scaling yarn added to its config.json) loads, converts (`convert mla`), checks and
# compares like any other model.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-info

# ---- GPT-2: no RoPE, so no TransMLA; everything else available
out=$("$ATTNLAB" -e "synth demo-gpt2 $T/g seed 2; load $T/g; info; info to $T/g.json" 2>&1)
ok "gpt2 info exits 0" test $? -eq 0
ok "gpt2: ranks vo available" has "$out" "^ranks vo  *yes$"
ok "gpt2: convert mla refused with the reason" has "$out" "^convert mla  *no: .* has no RoPE"
ok "gpt2: ppl available" has "$out" "^ppl/calibrate  *yes$"
ok "gpt2: layernorm" has "$out" "^norm  *layernorm$"
json() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }
if command -v python3 >/dev/null; then
    ok "json: convert_mla not available" test "$(json "$T/g.json" "d['convert_mla']['available']")" = False
    ok "json: its reason" has "$(json "$T/g.json" "d['convert_mla']['reason']")" "has no RoPE"
    ok "json: one key per analysis" test "$(json "$T/g.json" "sum(k in d for k in ['ranks_vo','ranks_qk','spectrum','ppl','convert_mla','convert_tpa','kvsvd','compare','export'])")" = 9
fi

# ---- a YaRN-scaled GQA model
"$ATTNLAB" -e "synth demo-llama $T/y dtype f32 seed 5" >/dev/null 2>&1
ok "demo-llama written" test -f "$T/y/config.json"
python3 - "$T/y/config.json" <<'PY'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
c["rope_scaling"] = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": max(16, c.get("max_position_embeddings", 256) // 4)}
json.dump(c, open(p, "w"), indent=1)
PY
out=$("$ATTNLAB" -e "load $T/y as y; info; convert mla kv-rank full; check; compare kv-budget 32" 2>&1)
ok "yarn: load, convert, check, compare exit 0" test $? -eq 0
ok "yarn: info names the scaling" has "$out" "^rope_scaling  *yarn$"
ok "yarn: convert mla available" has "$out" "^convert mla  *yes$"
ok "yarn: check reports layers" has "$out" "^layer  *score_err  *out_err"
conv=$(awk '/^layer  alpha/ { c = 1; next } c && $1 == "0" { print $5; exit }' <<<"$out")
chk=$(awk '/^layer  score_err/ { c = 1; next } c && $1 == "0" { print $2; exit }' <<<"$out")
ok "yarn: check reproduces the conversion's layer-0 score error ($conv vs $chk)" test -n "$conv" -a "$conv" = "$chk"
hasnt_err() { hasnt "$out" "rope_scaling type"; }
ok "yarn: nothing refused" hasnt_err
cli_done
