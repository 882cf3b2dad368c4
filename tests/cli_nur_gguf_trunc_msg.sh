#!/usr/bin/env bash
# cli_nur_gguf_trunc_msg.sh -- (nur's review) a GGUF cut inside its tokenizer array is refused (good), but the
# message says "tokenizer.ggml.tokens at byte 750 needs 18446744073709551615 bytes, the file has 3000":
# core/io/gguf.c reads an array whose count cannot fit with need(c, SIZE_MAX, key), so SIZE_MAX is printed as
# the size needed. Asserted: refused, naming the key, without SIZE_MAX. FAILS on cb14092.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-nur-gguf-trunc shared-cache
cd "$T" || exit 1
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
e "load $SRC; export s.gguf" >/dev/null
head -c 3000 s.gguf > cut.gguf
out=$(e "load cut.gguf")
ok "refused as truncated ($out)" has "$out" "truncated GGUF"
ok "  naming the key" has "$out" "tokenizer.ggml.tokens"
ok "  without SIZE_MAX as the bytes needed" hasnt "$out" "18446744073709551615"
ok "  saying the array's count (512 tokens of at least 8 bytes) and that the file may be corrupt" has "$out" \
    "truncated GGUF, or corrupt: tokenizer.ggml.tokens at byte 763 is an array of 512 elements of at least 8 bytes each; 2237 bytes are left (the file has 3000)"
cli_done
