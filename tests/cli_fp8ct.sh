#!/usr/bin/env bash
# cli_fp8ct.sh -- compressed-tensors FP8 checkpoints (issue 28): stories260K-hf with its projections
# written by tests/fp8ct_quant.py (pure Python, its own E4M3 table) as F8_E4M3 "<w>" times "<w>_scale"
# per tensor ([] F32), per channel ([R, 1] F32) and per channel in BF16, each module with an
# input_scale of 1e9 that weights must not use, beside F32 twins holding the values Python decoded.
# `ranks vo` / `ranks qk` and `ppl` (f32 and bf16 compute) print the same as on the twin; a NaN scale
# and a scale of the wrong shape are refused, naming the tensor; a truncation's export copies untouched
# tensors and scales bit for bit, writes the rewritten ones in BF16 without weight_scale / input_scale,
# listed in the config's ignore; `export F.gguf` dequantizes them, saying so; `lint` takes weight_scale / input_scale as the scales they are and
# checks their shape.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-fp8ct
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
Q="python3 $ATTNLAB_SRC/tests/fp8ct_quant.py"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"

analyses() {
    e "load $1 as m; ranks vo tau 0.9; ranks qk offset 4 tau 0.9; ppl $TXT; set compute bf16; ppl $TXT" |
        grep -v "^loaded\|^ppl of\|tok/s\|^compute bf16 asked"
}

for spec in "tensor tensor '' f32" "channel channel '' f32" "channel-bf16 channel bf16 bf16-f32"; do
    eval "set -- $spec"
    d=$1
    $Q "$SRC" "$T/$d" $2 $3 && $Q "$SRC" "$T/$d-f32" $2 $4
    ok "$d: written" test -f "$T/$d/model.safetensors" -a -f "$T/$d-f32/model.safetensors"
    a=$(analyses "$T/$d")
    b=$(analyses "$T/$d-f32")
    ok "$d: ranks and ppl printed" test "$(grep -c . <<<"$a")" -gt 90
    ok "$d: ranks and ppl equal the F32 twin's" test "$a" = "$b"
    [ "$a" = "$b" ] || diff <(echo "$a") <(echo "$b") | head -5
    ok "$d: ppl 3.7-3.8 (the F32 model: 3.73)" has "$a" "^  1127  1.3[0-9]*  3\.7"
done
ok "per-channel and per-tensor decode differently" test "$(analyses "$T/tensor")" != "$(analyses "$T/channel")"

# ---- export of a truncation: untouched tensors (and their scales) bit for bit, the rewritten ones BF16
# without their weight_scale / input_scale, listed in compressed-tensors' ignore
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
out=$(e "load $T/channel; truncate vo tau 0.9 layers 1; ppl $TXT; export $T/ex format dense; load $T/ex as d; ppl $TXT")
ok "export: 4 rewritten (v / o_proj, and q / k_proj: vLLM fuses q/k/v)" has "$out" "^exported VO of channel to .*tensors copied bit for bit, 4 rewritten"
p=$(grep "^  1127" <<<"$out" | awk '{print $3}' | tr '\n' ' ')
ok "export: its ppl is the working copy's to BF16 rounding, of q / k too ($p)" \
    python3 -c "import sys; a, b = map(float, sys.argv[1:3]); sys.exit(abs(a / b - 1) > 5e-4)" $p
msg=$(python3 -c "import sys; from st_tensors import truncation_export_problems as p; print(p(*sys.argv[1:3]))" \
    "$T/channel" "$T/ex")
ok "export: untouched bit for bit, rewritten (and their q / k) BF16 without scales, in ignore [$msg]" test -z "$msg"

# ---- GGUF: dequantized in the dtype asked, said in its line; in f32 the same ppl
out=$(e "load $T/channel; ppl $TXT; export $T/ch.gguf dtype f32; load $T/ch.gguf as g; tokenizer $SRC/tok512.bin; ppl $TXT")
ok "gguf: written (weight_scale / input_scale are not tensors of llama.cpp's)" has "$out" "^exported channel as GGUF to .*, F32, "
ok "gguf: its line says dequantized" has "$out" "^  F8_E4M3 weights dequantized to F32$"
p=$(grep "^  1127" <<<"$out" | awk '{print $3}' | tr '\n' ' ')
ok "gguf: the same ppl from llama.cpp's layout ($p)" \
    python3 -c "import sys; a, b = map(float, sys.argv[1:3]); sys.exit(abs(a / b - 1) > 1e-5)" $p

# ---- lint: the weight_scale / input_scale beside each FP8 weight are what compressed-tensors reads
for d in tensor channel channel-bf16; do
    out=$(e "lint $T/$d")
    ok "$d lint: transformers loads it" has "$out" "^transformers  *LlamaForCausalLM  *loads$"
    ok "$d lint: no _scale_inv asked, no scale unknown" hasnt "$out" "_scale_inv\|weight_scale (5 tensors\|input_scale (5 tensors"
done

$Q "$SRC" "$T/nan" channel nan-scale
run -e "load $T/nan; ppl $TXT"
ok "NaN scale refused" test "$(rc)" != 0
ok "... naming the tensor and the row" has "$(cat err.txt)" "'model.layers.0.self_attn.k_proj.weight_scale' row 0 is nan: the scale of FP8 weight"
$Q "$SRC" "$T/short" channel short-scale
run -e "load $T/short; ppl $TXT"
ok "scale of the wrong shape refused" has "$(cat err.txt)" "'model.layers.0.self_attn.k_proj.weight_scale' should be F32, BF16 or F16 of shape \[\], \[1\] or \[32, 1\]"
ok "lint: scale of the wrong shape" has "$(e "lint $T/short")" "error .*k_proj.weight_scale is F32 \[31, 1\]; compressed-tensors FP8 scales of a \[32, 64\] weight are"
cli_done
