#!/usr/bin/env bash
# cli_export_dense.sh -- `export DIR format dense` after `truncate`: the source's family, config,
# tensor names, shapes and dtypes (no farr/ side files), loadable as the source's family;
# `check DIR` confirms the fused maps (per-head ranks of an MLA model: kept singular values equal
# the source's leading ones, nothing past the rank); a dense export of a GQA model loads and runs.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-export-dense shared-cache
cd "$T" || exit 1

# ---- MLA (one basis per head): truncate VO, export dense, check
"$B" -e "load demo-r1-f32 as r; truncate vo rank 4 policy model-max; export rd format dense; check rd; load rd as e; info" \
    >out.txt 2>err.txt || fail "dense export of demo-r1-f32: $(cat err.txt)"
grep -q "(format dense)" out.txt || fail "export narration: [$(cat out.txt)]"
[ -d rd/farr ] && fail "dense export has farr/ side files"
[ -s rd/config.json ] && [ -s rd/farr_manifest.json ] || fail "dense export files: [$(ls rd)]"
grep -q "PASS: the export's fused maps are the plan's" out.txt || fail "check of the dense export: [$(cat out.txt)]"
grep -q '"format":	"dense"' rd/farr_manifest.json || fail "manifest format"
grep -Eq "^model_type +deepseek_v3$" out.txt || fail "the export loads as the source's family: [$(cat out.txt)]"

# ---- GQA: dense export of a VO truncation (groups share a basis: rank checked) loads as llama
"$B" -e "load demo-llama as d; truncate vo rank 8; export ld format dense; check ld; load ld as e; info" \
    >out.txt 2>err.txt || fail "dense export of demo-llama: $(cat err.txt)"
grep -q "PASS" out.txt || fail "check of the GQA dense export: [$(cat out.txt)]"
[ -d ld/farr ] && fail "GQA dense export has farr/ side files"
grep -Eq "^model_type +llama$" out.txt || fail "GQA export loads as llama"

# ---- a factors export keeps its side files (`check DIR` takes it too: cli_farr_fp8)
"$B" -e "load demo-r1-f32; truncate vo rank 4 policy model-max; export rf format factors" >/dev/null 2>err.txt \
    || fail "factors export: $(cat err.txt)"
[ -d rf/farr ] || fail "factors export keeps its side files"
# ---- lint every dense export (issue 13, 4): the source's family, every tensor where its loader
# expects it; the demos have no tokenizer (llama.cpp's converter needs one, the rest load), and a
# source with tokenizer files -- the demo and each `synth family` -- gives an export every target loads
for d in rd:DeepseekV3ForCausalLM ld:LlamaForCausalLM; do
    "$B" -e "lint ${d%%:*}" >out.txt 2>err.txt || fail "lint ${d%%:*}: $(cat err.txt)"
    grep -q ": 1 error, 1 warning" out.txt && [ "$(grep -Ec "^(transformers|vLLM|SGLang) +${d#*:} +loads( with --skip-tokenizer-init .*)? *$" out.txt)" = 3 ] \
        && grep -Eq "^llama.cpp .*will not load" out.txt || fail "lint ${d%%:*}: [$(cat out.txt)]"
done
"$B" -e "synth demo-llama tl dtype f32" >/dev/null 2>err.txt || fail "synth: $(cat err.txt)"
for f in tl qwen3 qwen3_moe gemma2 gemma3_text mixtral phi3 gpt_neox olmo2 olmo3 deepseek_v3; do
    [ "$f" = tl ] || "$B" -e "synth family $f src-$f" >/dev/null 2>err.txt || fail "synth family $f: $(cat err.txt)"
    s=src-$f; [ "$f" = tl ] && s=tl
    echo '{}' >"$s/tokenizer.json"
    echo '{}' >"$s/tokenizer_config.json"
    "$B" -e "load $s; truncate vo rank 4 policy model-max; export dense-$f format dense; lint dense-$f" >out.txt 2>err.txt \
        || fail "dense export + lint of $f: $(cat err.txt)"
    grep -q "^lint dense-$f: .*: 0 errors, 0 warnings" out.txt && [ "$(grep -c ' loads *$' out.txt)" = 4 ] \
        || fail "lint dense-$f: [$(grep -A12 '^lint' out.txt)]"
done

cli_done
