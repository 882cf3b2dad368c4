#!/usr/bin/env bash
# cli_kv_bytes_quant.sh -- one answer to "how many KV cache bytes per token" on a quantized model whose
# config.json says torch_dtype float32 (stories260K-hf quantized to INT4 / NVFP4 / FP8 by the tests'
# quantizers): `info` (kv_cache_dtype BF16: engines run quantized weights with 16-bit activations),
# `truncate`'s line and `kv-cache`'s rows agree on 2 bytes a value (640 bytes per token for 5 layers of
# 64 values). The old truncate / kv-cache read torch_dtype alone and said 1280 beside info's 640.
# The F32 source keeps 4 bytes everywhere.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-kv-bytes-quant
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
P="python3 $ATTNLAB_SRC/tests"
$P/int4ct_quant.py "$SRC" "$T/int4"
$P/fp4_quant.py "$SRC" "$T/nvfp4" nvfp4
$P/fp8ct_quant.py "$SRC" "$T/fp8" channel
for k in int4 nvfp4 fp8 f32; do
    m=$T/$k b=640 a=632
    [ $k = f32 ] && m=$SRC b=1280 a=1264
    out=$(e "load $m; info; truncate vo tau 0.9 layers 1; kv-cache")
    ok "$k: info says $b" has "$out" "^kv_bytes_per_token  *$b$"
    ok "$k: truncate's line says $b -> $a" has "$out" "whole model $b -> $a bytes per token ("
    ok "$k: kv-cache's loaded row says $b" has "$out" "as loaded (GQA; $b bytes per token in 5 layers)"
done
cli_done
