#!/usr/bin/env bash
# cli_kv_dtype_rule.sh -- one answer to "how many KV-cache bytes per token": `info`, `kv-cache` (its loaded
# row, a conversion's row and `context N`) and `truncate`'s line take the cache dtype from one rule
# (kvcache_dtype, core/model/kvcache.h), and info's kv_cache_dtype_from / kv-cache's and truncate's lines
# say why. The rule, from the engines' sources: the config's torch_dtype / dtype (vLLM's and transformers'
# dtype "auto"; vLLM's kv_cache_dtype "auto" is that dtype), whatever the weights are stored in; a GGUF:
# F16 (llama.cpp's cache_type_k / cache_type_v default). stories260K-hf (F32 weights, 5 layers x 64 values)
# under torch_dtype bfloat16, under "dtype": "bfloat16" (transformers v5's key), as it ships (float32),
# demo-llama-bf16 (BF16 weights, 4 layers x 128 values) and the F32 GGUF of stories260K-hf.
# The old binary said 1280 in info beside truncate's and kv-cache's 640 for the bfloat16 configs, and
# 1280 everywhere for the F32 GGUF (llama.cpp caches it in F16: 640).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-kv-dtype-rule shared-cache
cd "$T" || exit 1
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
cp -r "$SRC" bf && sed -i 's/"torch_dtype": *"float32"/"torch_dtype": "bfloat16"/' bf/config.json
cp -r "$SRC" bfv5 && sed -i 's/"torch_dtype": *"float32"/"dtype": "bfloat16"/' bfv5/config.json
ok "the bfloat16 configs written" grep -q '"torch_dtype": "bfloat16"' bf/config.json
ok "  and the v5 key" grep -q '"dtype": "bfloat16"' bfv5/config.json
run -e "load $SRC; export s32.gguf format gguf"
ok "the F32 GGUF written (rc $(rc))" test -f s32.gguf

# check MODEL BYTES DTYPE WHY: every command's KV bytes of MODEL (5 layers of 64 values but demo-llama-bf16's 4 of 128)
check() {
    local m=$1 b=$2 d=$3 why=$4 v=2 L=5
    [ "$m" = demo-llama-bf16 ] && L=4
    [ "$d" = F32 ] && v=4
    out=$(e "load $m as x; info; truncate vo rank 7 layers 1; kv-cache; kv-cache context 10")
    ok "$m: info kv_bytes_per_token $b" has "$out" "^kv_bytes_per_token  *$b$"
    ok "$m: info kv_cache_dtype $d" has "$out" "^kv_cache_dtype  *$d$"
    ok "$m: info says why ($why)" has "$out" "^kv_cache_dtype_from  *$why"
    ok "$m: truncate's line $b -> ... in $d" has "$out" "whole model $b -> [0-9]* bytes per token ($d: $why"
    ok "$m: kv-cache's loaded row $b" has "$out" "as loaded (GQA; $b bytes per token in $L layers)"
    ok "$m: kv-cache's header $v bytes per value ($d)" has "$out" "; $v bytes per value ($d: $why"
    ok "$m: kv-cache context 10: $((10 * b)) bytes, $v per value ($d)" \
        has "$out" "at a context of 10 tokens, $v bytes per value ($d: $why.*: the KV cache holds $((10 * b / v)) values"
    out=$(e "load $m as x; convert mla kv-rank 16 ppl off; kv-cache")
    ok "$m: convert mla's kv-cache row at $v bytes a value" \
        has "$out" "convert mla (MLA R 16 + D [0-9]*; [0-9]* bytes per token in $L layers"
    local rv=$(grep -o "convert mla (MLA R 16 + D [0-9]*" <<<"$out" | awk '{print $NF}')
    ok "$m:   = (16 + $rv) x $L x $v" has "$out" "; $(((16 + rv) * L * v)) bytes per token in $L layers"
}
check bf 640 BF16 "config torch_dtype bfloat16; weights stored F32"
check bfv5 640 BF16 "config torch_dtype bfloat16; weights stored F32"
check "$SRC" 1280 F32 "config torch_dtype float32"
check demo-llama-bf16 1024 BF16 "config torch_dtype bfloat16"
check s32.gguf 640 F16 "a GGUF: llama.cpp's default cache type"
cli_done
