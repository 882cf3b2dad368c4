#!/usr/bin/env bash
# cli_lint.sh -- `lint DIR` through `attnlab -e` and Lua: the three demo models written by synth
# (no tokenizer: llama.cpp's converter refuses, the others load; with tokenizer files planted every
# target loads), a FaRR export, a TransMLA export (what lint says follows the folder's actual
# content: kv_a_layernorm present or not, qk_latent_layernorm set or not), a copy of it with both
# defects planted, a TPA export, org/name through the Hugging Face cache (llama.cpp's row naming the
# GGUF architecture), a gemma3_text `synth family` checkpoint and its dense export (clean) and a copy
# with a q_norm renamed, `to FILE.json`, the Lua value, and the exit status (0 whatever lint finds; 1
# for a missing folder).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-lint shared-cache
cd "$T" || exit 1

# row TARGET: the compact table's line for a target (out.txt)
row() { grep -E "^$1 " out.txt; }

run -e "synth demo-llama llama dtype f32; synth demo-gpt2 gpt2; synth demo-r1 r1"
[ "$(rc)" = 0 ] || fail "synth: [$(cat err.txt)]"

for m in llama:LlamaForCausalLM gpt2:GPT2LMHeadModel r1:DeepseekV3ForCausalLM; do
    d=${m%%:*} cls=${m#*:}
    run -e "lint $d"
    [ "$(rc)" = 0 ] || fail "lint $d: rc $(rc) [$(cat err.txt)]"
    grep -q "^lint $d: .*($cls), .* tensors in .* files*: 1 error, 1 warning" out.txt || fail "lint $d header: [$(head -1 out.txt)]"
    row transformers | grep -q "$cls  *loads *$" || fail "lint $d transformers: [$(cat out.txt)]"
    row vLLM | grep -q "loads with --skip-tokenizer-init (or --tokenizer naming the source) *$" || fail "lint $d vLLM: [$(cat out.txt)]"
    row llama.cpp | grep -q "will not load" || fail "lint $d llama.cpp: [$(cat out.txt)]"
    grep -q "error    llama.cpp: no tokenizer files: convert_hf_to_gguf.py" out.txt || fail "lint $d tokenizer: [$(cat out.txt)]"
    echo '{}' >"$d/tokenizer.json"
    echo '{}' >"$d/tokenizer_config.json"
    run -e "lint $d"
    grep -q ": 0 errors, 0 warnings" out.txt || fail "lint $d with a tokenizer: [$(cat out.txt)]"
    [ "$(grep -c ' loads *$' out.txt)" = 4 ] || fail "lint $d: every target loads: [$(cat out.txt)]"
done
grep -q "advisory vLLM, SGLang: FlashMLA needs kv_lora_rank 512 and qk_rope_head_dim 64 (this folder: 96 and 16)" out.txt \
    || fail "FlashMLA advisory: [$(cat out.txt)]"

# a FaRR export (factors format: the family's own layout, zero-padded heads): every engine loads it
run -e "load llama as l; truncate vo rank 8; export farr; lint farr"
[ "$(rc)" = 0 ] || fail "farr export + lint: [$(cat err.txt)]"
grep -q "^lint farr: llama (LlamaForCausalLM), 39 tensors in 1 file: 0 errors, 0 warnings" out.txt \
    || fail "lint farr: [$(cat out.txt)]"

# a TransMLA export: lint reports what the folder holds
run -e "load llama as l; convert mla kv-rank 32; export mla; lint mla"
[ "$(rc)" = 0 ] || fail "mla export + lint: [$(cat err.txt)]"
grep -q "^lint mla: deepseek_v3 (DeepseekV3ForCausalLM)" out.txt || fail "lint mla header: [$(cat out.txt)]"
norm=$(grep -ac "kv_a_layernorm" mla/model*.safetensors | awk -F: '{s += $NF} END {print s + 0}')
latent=$(grep -c '"qk_latent_layernorm":[[:space:]]*false' mla/config.json)
if [ "$norm" = 0 ]; then
    grep -q "error    all targets: missing model.layers.0.self_attn.kv_a_layernorm.weight (4 tensors like it" out.txt \
        || fail "lint mla: missing kv_a_layernorm: [$(cat out.txt)]"
    row vLLM | grep -q "will not load" || fail "lint mla vLLM: [$(cat out.txt)]"
fi
if [ "$latent" != 0 ]; then
    grep -q "config.json sets qk_latent_layernorm: false, a key only attnlab reads" out.txt \
        || fail "lint mla: qk_latent_layernorm: [$(cat out.txt)]"
fi
# the export is stock DeepSeek-V3 (issue 13, 1): kv_a_layernorm written, no attnlab-only key
[ "$norm" != 0 ] && [ "$latent" = 0 ] || fail "the TransMLA export is not stock: kv_a_layernorm $norm, qk_latent_layernorm: false $latent"
if [ "$norm" = 0 ] || [ "$latent" != 0 ]; then
    row transformers | grep -q "loads, but computes a different model" || fail "lint mla transformers: [$(cat out.txt)]"
else
    row transformers | grep -q "loads *$" || fail "lint mla (stock semantics) transformers: [$(cat out.txt)]"
fi
# both defects planted in a copy, whatever the export holds: the attnlab-only key in config.json,
# and kv_a_layernorm renamed in the header (same length: offsets unchanged) -- every stock engine
# computes a different model or refuses it
cp -r mla mla-planted
[ "$latent" = 0 ] && sed -i '0,/{/s//{\n\t"qk_latent_layernorm": false,/' mla-planted/config.json
[ "$norm" = 0 ] || LC_ALL=C sed -i 's/kv_a_layernorm/kv_a_layernorX/g' mla-planted/model*.safetensors*
run -e "lint mla-planted to planted.json"
[ "$(rc)" = 0 ] || fail "lint mla-planted: rc $(rc) [$(cat err.txt)]"
grep -q "config.json sets qk_latent_layernorm: false" out.txt || fail "planted key: [$(cat out.txt)]"
grep -q "missing model.layers.0.self_attn.kv_a_layernorm.weight (4 tensors like it" out.txt || fail "planted norm: [$(cat out.txt)]"
grep -q "wrote 4 rows to planted.json" out.txt || fail "lint to FILE: [$(cat out.txt)]"
[ -s err.txt ] && fail "lint mla-planted warned: [$(cat err.txt)]"
grep -q '"target":[[:space:]]*"transformers"' planted.json && grep -q '"verdict":[[:space:]]*"loads, but computes a different model"' planted.json \
    && grep -q '"verdict":[[:space:]]*"will not load"' planted.json \
    && grep -q '"reasons":[[:space:]]*"[^"]*qk_latent_layernorm: false' planted.json || fail "planted.json: [$(cat planted.json)]"

# a family of issue 12 (tensor names from its layouts) and its dense FaRR export: every target loads them
run -e "synth family gemma3_text g3"
echo '{}' >g3/tokenizer.json
echo '{}' >g3/tokenizer_config.json
run -e "lint g3; load g3; truncate vo rank 4 policy model-max; export g3d format dense; lint g3d"
[ "$(rc)" = 0 ] && grep -q "^lint g3: gemma3_text (Gemma3ForCausalLM), 80 tensors in 1 file: 0 errors, 0 warnings" out.txt \
    && grep -q "^lint g3d: gemma3_text (Gemma3ForCausalLM), 80 tensors in 1 file: 0 errors, 0 warnings" out.txt \
    && [ "$(grep -c ' loads *$' out.txt)" = 8 ] || fail "lint gemma3_text: [$(cat out.txt) $(cat err.txt)]"
LC_ALL=C sed -i 's/layers\.1\.self_attn\.q_norm/layers.1.self_attn.q_nor_/' g3/model.safetensors
run -e "lint g3"
grep -q "missing model.layers.1.self_attn.q_norm.weight" out.txt && grep -q "model.layers.1.self_attn.q_nor_.weight: no tensor of Gemma3ForCausalLM" out.txt \
    || fail "lint g3 with q_norm renamed: [$(cat out.txt)]"

# a TPA export: attnlab's own layout
run -e "load llama as l; convert tpa kv-rank 2; export tpa; lint tpa"
[ "$(rc)" = 0 ] && grep -q "an attnlab TPA export (tpa_manifest.json)" out.txt || fail "lint tpa: [$(cat out.txt) $(cat err.txt)]"

# Lua: the value is the full table, one row per target
run -e "lua local t = attn.lint('llama'); print(#t, t[1].target, t[1].reads, t[1].verdict, t[4].target, t[4].notes == '')"
[ "$(rc)" = 0 ] && grep -q "^4	transformers	LlamaForCausalLM	loads	llama.cpp	true" out.txt \
    || fail "Lua value: [$(cat out.txt) $(cat err.txt)]"
run -e "set format csv; lint r1"
grep -q "^transformers,DeepseekV3ForCausalLM,loads,," out.txt || fail "csv format: [$(cat out.txt)]"

# org/name through the Hugging Face cache, and llama.cpp's row names the GGUF architecture
mkdir -p hub/models--acme--tiny/snapshots/rev1
cp r1/* hub/models--acme--tiny/snapshots/rev1/
HF_HUB_CACHE=$T/hub run -e "lint acme/tiny"
[ "$(rc)" = 0 ] && grep -q "^lint .*hub/models--acme--tiny/snapshots/rev1: deepseek_v3" out.txt \
    && row llama.cpp | grep -q "deepseek2 (GGUF)  *loads" || fail "lint org/name: [$(cat out.txt) $(cat err.txt)]"

# a missing folder is the one failure
run -e "lint nowhere"
[ "$(rc)" = 1 ] && grep -q "lint: nowhere: no such folder or file" err.txt || fail "lint nowhere: rc $(rc) [$(cat err.txt)]"

cli_done
