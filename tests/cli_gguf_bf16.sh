#!/usr/bin/env bash
# cli_gguf_bf16.sh -- `load X.gguf` keeps an F16 / BF16 GGUF's tensors in their own dtype (gguf_arch.c:
# back_dtype; the old reader widened every tensor to F32): demo-llama-bf16 exported to GGUF bf16 and
# loaded back has the source's `info` rows dtype, weights, compute and kv_bytes_per_token (its
# kv_cache_dtype is F16, llama.cpp's default cache type, where the source's is BF16: the same bytes), and the source's `ppl` bit for bit in both compute modes (the same 17 digits);
# an f16 export reads back as F16; a Q8_0 one is still read widened to F32, which info's gguf_tensors
# row says.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-gguf-bf16 shared-cache
cd "$T" || exit 1
echo "1 5 9 23 7 100 3 44 12 9 8 77 66 55 4 3 2 1 0 99 17 18 19 20 21 22 23 24 25 26 27 28 29 30" > ids.txt

run -e "load demo-llama-bf16 as s; export s.gguf dtype bf16; export s16.gguf dtype f16; export sq.gguf dtype q8_0"
ok "exports ran (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0

# row NAME MODEL: info's row NAME
row() { "$ATTNLAB" -e "load $2; info" 2>&1 </dev/null | awk -v k="$1" '$1 == k { $1 = ""; print; exit }'; }
for k in dtype weights compute kv_bytes_per_token; do
    a=$(row "$k" demo-llama-bf16) b=$(row "$k" s.gguf)
    ok "info $k: the source's [$a] [$b]" test -n "$a" -a "$a" = "$b"
done
ok "info dtype BF16 [$(row dtype s.gguf)]" has "$(row dtype s.gguf)" "BF16"
ok "info kv_cache_dtype of the GGUF: F16, llama.cpp's [$(row kv_cache_dtype s.gguf)]" has "$(row kv_cache_dtype s.gguf)" "^ F16$"
ok "f16 export reads back F16 [$(row dtype s16.gguf)]" has "$(row dtype s16.gguf)" "F16"
ok "q8_0 export reads back widened, F32 [$(row dtype sq.gguf)]" has "$(row dtype sq.gguf)" "F32"
ok "info gguf_tensors of the bf16 file: kept [$(row gguf_tensors s.gguf)]" has "$(row gguf_tensors s.gguf)" "^ [0-9]* BF16 kept"
ok "info gguf_tensors of the q8_0 file: widened [$(row gguf_tensors sq.gguf)]" \
    has "$(row gguf_tensors sq.gguf)" " [0-9]* Q8_0 read widened to F32, [0-9]* F32$"
ok "no gguf_tensors row for a folder" test -z "$(row gguf_tensors demo-llama-bf16)"

# ppl MODEL MODE: the perplexity (json, all digits) of MODEL in compute MODE
ppl() { ppl_of "set compute $2; load $1; ppl ids ids.txt seqlen 32"; }
for mode in f32 bf16; do
    a=$(ppl demo-llama-bf16 $mode) b=$(ppl s.gguf $mode)
    ok "ppl compute $mode: the source's bit for bit [$a] [$b]" test "${a#ERR}" = "$a" -a "$a" = "$b"
done
cli_done
