#!/usr/bin/env bash
# cli_int4ct.sh -- compressed-tensors pack-quantized INT4 checkpoints (issue 28): stories260K-hf with its
# projections written by tests/int4ct_quant.py (pure Python: its own packing, element i at bit 4i,
# value + 8, BF16 scales per 32) beside an F32 twin holding the values Python decoded. `load` / `info`
# name the encoding; `ranks vo` / `ranks qk` and `ppl` (f32 and bf16 compute) print the same as on the
# twin; a NaN scale, a scale grid of the wrong shape and a zero point are refused at `load`, naming
# the tensor; a truncation's export writes the rewritten ones BF16 (listed in ignore) and the rest bit
# for bit; `export F.gguf` dequantizes; `lint` takes the words, scales and shapes as the weights they are.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-int4ct
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
Q="python3 $ATTNLAB_SRC/tests/int4ct_quant.py"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"

analyses() {
    e "load $1 as m; ranks vo tau 0.9; ranks qk offset 4 tau 0.9; ppl $TXT; set compute bf16; ppl $TXT" |
        grep -v "^loaded\|^ppl of\|tok/s\|^compute bf16 asked"
}

$Q "$SRC" "$T/int4" && $Q "$SRC" "$T/int4-f32" f32
ok "written" test -f "$T/int4/model.safetensors" -a -f "$T/int4-f32/model.safetensors"
out=$(e "load $T/int4; info")
ok "load names the encoding" has "$out" "^loaded int4: llama, .*, INT4 -- "
ok "info's weights per group" has "$out" "^weights  *attention INT4, mlp .*INT4, embeddings F32$"
a=$(analyses "$T/int4")
b=$(analyses "$T/int4-f32")
ok "ranks and ppl printed" test "$(grep -c . <<<"$a")" -gt 90
ok "ranks and ppl equal the F32 twin's" test "$a" = "$b"
[ "$a" = "$b" ] || diff <(echo "$a") <(echo "$b") | head -5
ok "ppl 3.7-4.5 (the F32 model: 3.76)" has "$a" "^  1127  1\.[0-9]*  [34]\.[0-9]"

# ---- export of a truncation: untouched tensors bit for bit, the rewritten ones BF16 without their
# packed words, scales or shape, listed in ignore; GGUF dequantized, saying so
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
out=$(e "load $T/int4; truncate vo tau 0.9 layers 1; ppl $TXT; export $T/ex format dense; load $T/ex as d; ppl $TXT")
ok "export: 4 rewritten (v / o_proj, and q / k_proj: vLLM fuses q/k/v)" has "$out" "^exported VO of int4 to .*tensors copied bit for bit, 4 rewritten"
p=$(grep "^  1127" <<<"$out" | awk '{print $3}' | tr '\n' ' ')
ok "export: its ppl is the working copy's to BF16 rounding, of q / k too ($p)" \
    python3 -c "import sys; a, b = map(float, sys.argv[1:3]); sys.exit(abs(a / b - 1) > 5e-4)" $p
msg=$(python3 -c "import sys; from st_tensors import truncation_export_problems as p; print(p(*sys.argv[1:3]))" \
    "$T/int4" "$T/ex")
ok "export: untouched bit for bit, rewritten (and their q / k) BF16 alone, in ignore [$msg]" test -z "$msg"
out=$(e "load $T/int4; ppl $TXT; export $T/int4.gguf dtype f32; load $T/int4.gguf as g; tokenizer $SRC/tok512.bin; ppl $TXT")
ok "gguf: its line says dequantized" has "$out" "^  INT4 weights dequantized to F32$"
p=$(grep "^  1127" <<<"$out" | awk '{print $3}' | tr '\n' ' ')
ok "gguf: the same ppl from llama.cpp's layout ($p)" \
    python3 -c "import sys; a, b = map(float, sys.argv[1:3]); sys.exit(abs(a / b - 1) > 1e-5)" $p

for m in nan-scale short-scale zero-point; do $Q "$SRC" "$T/$m" $m; done
run -e "load $T/nan-scale; ppl $TXT"
ok "NaN scale refused" test "$(rc)" != 0
ok "... naming the tensor" has "$(cat err.txt)" "INT4 tensor 'model.layers.0.self_attn.k_proj.weight': group scale \[0, 0\] is nan"
run -e "load $T/short-scale; ppl $TXT"
ok "scales of the wrong shape refused" has "$(cat err.txt)" "'model.layers.0.self_attn.k_proj.weight_scale' should be BF16, F16 or F32 of shape \[32, 2\]"
run -e "load $T/zero-point; ppl $TXT"
ok "a zero point refused" has "$(cat err.txt)" "INT4 tensor 'model.layers.0.self_attn.k_proj.weight_packed' has a zero point"
# ---- lint: the INT4 words, group scales and shapes are what the config describes
out=$(e "lint $T/int4")
ok "lint: transformers loads it" has "$out" "^transformers  *LlamaForCausalLM  *loads$"
ok "lint: no missing weights, no unknown or integer tensors" hasnt "$out" "missing\|no tensors of\|bytes of I"
ok "lint: scales of the wrong shape" has "$(e "lint $T/short-scale")" "error .*k_proj.weight_scale is BF16 \[32, 1\]; INT4 group scales (one per 32 values) are BF16 \[32, 2\]"
cli_done
