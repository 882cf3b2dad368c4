#!/bin/bash
# cli_kv_context.sh -- `kv-cache context N` (issue 27: "a sliding window bounds the cache"): per layer type the values
# cached at a context of N tokens -- a sliding-window layer min(N, window) tokens, Llama 4's chunked layers at most a
# chunk, Gemma 4's KV-shared layers nothing of their own, Gemma 4's full layers at their own head dims, a hybrid's
# Gated DeltaNet / KDA / Mamba-2 layers a constant state (v_heads dk dv values per layer, float32 where
# mamba_ssm_cache_dtype says so) and conv window ((conv - 1)(2 k_heads dk + v_heads dv)) counted apart --
# with totals, on the synthetic checkpoints of gemma2, gemma3_text, gpt_oss, olmo3, exaone4,
# llama4_text, gemma4_text, qwen3_next, nemotron_h, kimi_linear, deepseek_v32 and glm_moe_dsa (the lightning indexer's
# keys in a row of their own, not on GLM-5's IndexShare layer) and on gemma-4-E2B-it's layout (tests/gemma4_tiny.py); CSV and
# JSON. And `info`'s per-layer-type attention parameters and KV values of Gemma 4 (gemma-4-31B-it's and E2B's
# layouts: the full layers' own head dims, k_eq_v's missing v_proj), and `info`'s `attention` row per layer type
# (Llama 4's chunks, Gemma 4's per-type dims and KV-shared sources, Mamba-2 / MLP-block / KDA layers by name).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-kv-context
cd "$T" || exit 1
for f in gemma2 gemma3_text gpt_oss olmo3 exaone4 llama4_text gemma4_text qwen3_next nemotron_h kimi_linear \
    deepseek_v32 glm_moe_dsa; do
    run -e "synth family $f $T/$f"
    [ "$(rc)" = 0 ] || fail "synth family $f [$(cat err.txt)]"
done
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
for r in 31B E2B; do
    python3 "$ATTNLAB_SRC/tests/gemma4_tiny.py" "$T/real$r" "$r" || fail "could not write the gemma-4-$r-it folder"
done

# csv FAMILY N: the rows of `kv-cache context N` (F32 weights: 4 bytes per value), header dropped
csv() { "$B" -e "load $T/$1; kv-cache context $2 to $T/$1-$2.csv" >/dev/null 2>&1 && tail -n +2 "$T/$1-$2.csv"; }
# expect FAMILY N LINE...: each LINE is a row of the CSV
expect() {
    local f=$1 n=$2 got bad=0
    shift 2
    got=$(csv "$f" "$n")
    for line in "$@"; do
        grep -qxF -- "$line" <<<"$got" || { fail "$f context $n: no row [$line] in [$got]"; bad=1; }
    done
    [ "$bad" = 1 ] || pass=$((pass + 1))
}

# window 8 on layers 0, 2 (2 KV heads x (32 + 32) = 128 values per token): 8 tokens each; the full layers 100
expect gemma2 100 'sliding window 8,"0, 2",2,8,128,2048,8192' 'full attention,"1, 3",2,100,128,25600,102400' \
    'total KV cache,,4,,,27648,110592'
# a context shorter than the window: every layer keeps all 5 tokens
expect gemma2 5 'sliding window 8,"0, 2",2,5,128,1280,5120' 'full attention,"1, 3",2,5,128,1280,5120' \
    'total KV cache,,4,,,2560,10240'
expect gemma3_text 100 'sliding window 8,0-4,5,8,64,2560,10240' 'full attention,5,1,100,64,6400,25600' \
    'total KV cache,,6,,,8960,35840'
expect gpt_oss 100 'sliding window 8,"0, 2",2,8,128,2048,8192' 'full attention,"1, 3",2,100,128,25600,102400'
expect olmo3 100 'sliding window 8,0-2,3,8,128,3072,12288' 'full attention,3,1,100,128,12800,51200' \
    'total KV cache,,4,,,15872,63488'
expect exaone4 100 'sliding window 8,0-2,3,8,128,3072,12288' 'full attention,3,1,100,128,12800,51200'
# Llama 4: the RoPE layers attend within chunks of 8: at most one chunk; the NoPE layer 3 every token
expect llama4_text 100 'chunked attention 8,0-2,3,8,128,3072,12288' 'full attention,3,1,100,128,12800,51200' \
    'total KV cache,,4,,,15872,63488'
expect gemma4_text 100 'sliding window 8,0-2,3,8,128,3072,12288' 'full attention,3,1,100,128,12800,51200' \
    "KV-shared (reads an earlier layer's cache),4-5,2,0,0,0,0" 'total KV cache,,6,,,15872,63488'
# Qwen3-Next: 3 Gated DeltaNet layers of a 4 x 16 x 16 state and a conv window of 3 x (2 x 2 x 16 + 4 x 16) = 384
expect qwen3_next 100 'Gated DeltaNet state (constant per sequence),0-2,3,,,3072,12288' \
    'Gated DeltaNet conv window (last 3 inputs),0-2,3,,,1152,4608' \
    'full attention,3,1,100,128,12800,51200' 'total KV cache,,1,,,12800,51200' \
    'total state (recurrent + conv),,3,,,4224,16896' 'total,,4,,,17024,68096'
expect qwen3_next 7 'Gated DeltaNet state (constant per sequence),0-2,3,,,3072,12288' 'full attention,3,1,7,128,896,3584'
# Nemotron-H: Mamba-2 layers 0, 3 of an 8 x 16 x 16 state, in float32 (mamba_ssm_cache_dtype) whatever `bytes` says,
# and a conv window of 3 x (2 x 2 x 16 + 8 x 16) = 576; the MLP blocks 2, 5 keep nothing
expect nemotron_h 100 'Mamba-2 state (constant per sequence),"0, 3",2,,,4096,16384' \
    'Mamba-2 conv window (last 3 inputs),"0, 3",2,,,1152,4608' \
    'full attention,"1, 4",2,100,128,25600,102400' 'total,,4,,,30848,123392'
got=$("$B" -e "load $T/nemotron_h; kv-cache context 100 bytes 2 to $T/n2.csv" 2>&1)
ok "nemotron_h bytes 2: the SSM state stays float32" grep -qxF 'Mamba-2 state (constant per sequence),"0, 3",2,,,4096,16384' "$T/n2.csv"
ok "... the conv window and the KV at 2 bytes" grep -qxF 'total,,4,,,30848,69888' "$T/n2.csv"
ok "... and the note says so" has "$got" "its SSM state in float32: mamba_ssm_cache_dtype"
# Kimi-Linear: 6 KDA layers of a 4 x 32 x 32 state and a conv window of 3 x (2 x 4 x 32 + 4 x 32) = 1152 (q, k, v each
# through its conv)
expect kimi_linear 100 'Kimi Delta Attention state (constant per sequence),"0-2, 4-6",6,,,24576,98304' \
    'Kimi Delta Attention conv window (last 3 inputs),"0-2, 4-6",6,,,6912,27648' \
    'full attention,"3, 7",2,100,80,16000,64000' 'total,,8,,,47488,189952'
# DeepSeek-V3.2: the MLA latent (64 + 16) and the indexer's keys (index_head_dim 32) on every layer; GLM-5's layer 1
# reuses layer 0's selection (IndexShare): no indexer keys there
expect deepseek_v32 100 'full attention,0-2,3,100,80,24000,96000' 'lightning indexer keys,0-2,3,100,32,9600,38400' \
    'total KV cache,,3,,,33600,134400'
expect glm_moe_dsa 100 'full attention,0-2,3,100,80,24000,96000' 'lightning indexer keys,"0, 2",2,100,32,6400,25600' \
    'total KV cache,,3,,,30400,121600'
# gemma-4-E2B-it: window 512 on 0-3, 5 (1 KV head x (16 + 16)), the full layer 4 at head_dim 32 (1 x (32 + 32)),
# layers 6-9 read 5's and 4's cache; bytes at the config's bfloat16 (2 per value)
expect realE2B 2000 'sliding window 512,"0-3, 5",5,512,32,81920,163840' 'full attention,4,1,2000,64,128000,256000' \
    "KV-shared (reads an earlier layer's cache),6-9,4,0,0,0,0" 'total KV cache,,10,,,209920,419840'
out=$(e "load $T/realE2B; kv-cache context 2000")
ok "the note: per token and against a cache without windows" has "$out" \
    "the KV cache holds 209920 values (105 per token; 448000 without windows or chunks: x0.4686)"
run -e "load $T/qwen3_next; kv-cache context 100 to $T/q.json"
ok "JSON: a state row's tokens are null" grep -q '"layer_type": "Gated DeltaNet state (constant per sequence)", "layers": "0-2", "n_layers": 3, "tokens_cached": null, "kv_values_per_token_per_layer": null, "values": 3072' "$T/q.json"
out=$(e "load $T/gemma2; kv-cache")
ok "kv-cache without context points to it on a windowed model" has "$out" \
    "(2 of gemma2's 4 layers cache no N tokens of their own (windows, chunks, KV-shared or recurrent layers): \`kv-cache context N\`"
out=$(e "load $T/deepseek_v32; kv-cache")
ok "... and not on a model whose every layer keeps N tokens" hasnt "$out" "kv-cache context N"
run -e "load $T/gemma2; kv-cache context 0"
ok "context 0 is refused" test "$(rc)" != 0

# info: Gemma 4's attention parameters and KV values per layer type
out=$(e "load $T/real31B; info")
# sliding: q 64 x 64 + k, v 64 x 64 (4 x 16) + o = 16384; full (k_eq_v): q 64 x 128 + k 64 x 32 + o 128 x 64 = 18432
ok "31B: attention parameters per layer type" has "$out" \
    "^attn_params_per_layer_by_type  *sliding 16384, full 18432 (no v_proj: attention_k_eq_v)$"
ok "31B: KV values per layer type" has "$out" \
    "^kv_values_per_token_per_layer_by_type  *sliding 128 (4 KV heads x (16 + 16)), full 64 (1 KV head x (32 + 32): K and V cached apart"
out=$(e "load $T/realE2B; info")
ok "E2B: attention parameters per layer type, KV-shared layers" has "$out" \
    "^attn_params_per_layer_by_type  *sliding 10240, full 20480; the KV-shared layers have no k_proj / v_proj$"
ok "E2B: KV values per layer type" has "$out" \
    "^kv_values_per_token_per_layer_by_type  *sliding 32 (1 KV head x (16 + 16)), full 64 (1 KV head x (32 + 32)); the KV-shared layers none of their own$"
out=$(e "load $T/gemma2; info")
ok "a model of one head shape has no by-type rows" hasnt "$out" "by_type"

# info's `attention` row names what each layer runs: Llama 4's chunks, Gemma 4's full layers' own dims and KV-shared
# layers' sources, the kind of a hybrid's other layers (Mamba-2, Nemotron-H's MLP blocks, KDA)
want_attn() {
    local got
    got=$(e "load $T/$1; info" | sed -n 's/^attention  *//p')
    [ "$got" = "$2" ] && pass=$((pass + 1)) || fail "$1: info attention [$got], want [$2]"
}
want_attn llama4_text "layers 0-2 chunked 8 (llama3 x16, theta 500000); layer 3 full (no RoPE)"
want_attn gemma4_text "layers 0-2 sliding 8 (RoPE theta 10000); layer 3 full (RoPE theta 1e+06; head_dim 64, 1 KV head); layer 4 sliding 8 (RoPE theta 10000; K/V of layer 2); layer 5 full (RoPE theta 1e+06; head_dim 64, 1 KV head; K/V of layer 3)"
want_attn realE2B "layers 0-3, 5 sliding 512 (RoPE theta 10000); layer 4 full (RoPE theta 1e+06; head_dim 32, 1 KV head); layers 6-8 sliding 512 (RoPE theta 10000; K/V of layer 5); layer 9 full (RoPE theta 1e+06; head_dim 32, 1 KV head; K/V of layer 4)"
want_attn nemotron_h "layers 0, 3 Mamba-2 (SSM); layers 1, 4 full (no RoPE); layers 2, 5 MLP block (no mixer)"
want_attn kimi_linear "layers 0-2, 4-6 Kimi Delta Attention (linear attention); layers 3, 7 full (no RoPE)"
want_attn qwen3_next "layers 0-2 Gated DeltaNet (linear attention); layer 3 full (RoPE theta 1e+07)"
cli_done
