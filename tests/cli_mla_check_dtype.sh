#!/usr/bin/env bash
# cli_mla_check_dtype.sh (nur's cli_nur_mla_f32_check.sh) -- (nur's review, trust) in f32 mode (the default) `check` after `convert mla` on a
# BF16 source says "evaluated as its float32 DeepSeek-V3 export reads back" and gives 380.784, while `export
# DIR` (no dtype) writes BF16 attention -- the source's -- and `check DIR` / `ppl` of it give 381.075. The
# session's check thus predicts an export the default `export` does not write; README's convert-mla row
# documents the f32-mode float32 layers, but check's line calls them "its export". bf16 mode gives one number
# (380.794, cli_bf16_hold). Asserted: check's after = check DIR's after of the default export, or check names
# the dtype gap (says BF16 / "dtype f32"). A design question for the integrator. FAILS on cb14092.
# Decision: check keeps predicting the float32 export and its line says so, names `export DIR dtype f32` as
# the command that writes it and says the default export writes BF16 (the source's dtype); asserted below:
# check of the dtype f32 export gives check's number, and a source whose default export is float32
# (demo-llama-f32) gets no such note.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-nur-mla-f32-check shared-cache
cd "$T" || exit 1
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
out=$(e "load demo-llama as s; calibrate ids ids.txt samples 4 seqlen 32; convert mla kv-rank 16; check; export ex; check ex")
afters=$(grep "^perplexity on 42 tokens" <<<"$out" | grep "(source)" | sed -E 's/.*, ([0-9.]+) after.*/\1/' | tr '\n' ' ')
ok "check and check DIR printed ($afters)" test "$(wc -w <<<"$afters")" = 2
a=$(cut -d' ' -f1 <<<"$afters"); b=$(cut -d' ' -f2 <<<"$afters")
ev=$(grep "^evaluated as its" <<<"$out")
one_or_said() { [ "$a" = "$b" ] || grep -q 'dtype f32' <<<"$ev"; }
ok "check's after $a = check DIR's $b of the default export, or check says the export differs" one_or_said
ok "check's line names the command and the default's dtype" has "$ev" \
    "; \`export DIR dtype f32\` writes that export -- the default \`export DIR\` writes BF16 attention, the source's dtype"
out=$(e "load demo-llama as s; calibrate ids ids.txt samples 4 seqlen 32; convert mla kv-rank 16 ppl off; export ex32 dtype f32; check ex32")
c=$(grep "^perplexity on 42 tokens" <<<"$out" | grep "(source)" | sed -E 's/.*, ([0-9.]+) after.*/\1/')
ok "check of the export that command writes gives check's $a (got $c)" test "$c" = "$a"
ok "  and differs from the default export's $b" test "$a" != "$b"
out=$(e "load demo-llama-f32 as s; calibrate ids ids.txt samples 4 seqlen 32; convert mla kv-rank 16 ppl off; check")
ok "an F32 source: check's line has no dtype note (its default export is the float32 one)" \
    hasnt "$(grep '^evaluated as its' <<<"$out")" "dtype f32"
ok "  but says float32" has "$(grep '^evaluated as its' <<<"$out")" "evaluated as its float32 DeepSeek-V3 export reads back, built in memory (no export written; non-attention tensors: the source's, which the export copies byte for byte)"
cli_done
