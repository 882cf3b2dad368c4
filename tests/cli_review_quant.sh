#!/usr/bin/env bash
# cli_review_quant.sh -- what a new user's review of issues 28 / 32 found misleading or contradictory in
# what attnlab says of a quantized model (stories260K-hf written in MXFP4, NVFP4, compressed-tensors
# NVFP4 / INT4 / FP8 and FP8 block scales by tests/fp4_quant.py, int4ct_quant.py, fp8ct_quant.py,
# fp8blk_quant.py, and copies with one scale patched):
# - a FaRR export's "re-encoded" line (and its manifest's reencoded.from) named the rewritten FP4 / INT4
#   weights "BF16 -> BF16": they were stored MXFP4 / NVFP4 / INT4 and are written in BF16; and its
#   refusal of `dtype fp8` called the source BF16.
# - a TransMLA export did not say which dtype its attention was written in (BF16 for a quantized
#   source, the source's own dtype otherwise, f32 for format attnlab), so its perplexity after `load`
#   differing from the session's in the 3rd digit went unexplained; and `check DIR` called that
#   difference "the export's rounding: float32" for a BF16 export.
# - `lint` said "loads" for every engine on folders whose scales `load` refuses (a NaN / infinite block,
#   group or row scale, a per-tensor scale of inf or 0): the same folder got two answers. Now an error
#   naming the tensor, with the verdict "loads, but computes a different model" (the engines compute NaN);
#   FP4 / INT4 block scales are read up to a byte budget (ATTNLAB_LINT_SCALE_BYTES), past it an advisory.
# - `export F.gguf dtype q8_0` of a quantized model said its weights were "dequantized to Q8_0".
# - `info`'s compute row said "bf16 (activations rounded to BF16, vdpbf16ps)" after `set compute bf16`
#   on an MXFP4 / INT4 / FP8 model whose `ppl` said in the same session that its products stay float32;
#   `generate` said nothing of its compute mode (now the line ppl prints).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-review-quant
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"

python3 "$ATTNLAB_SRC/tests/fp4_quant.py" "$SRC" "$T/mxfp4" mxfp4
python3 "$ATTNLAB_SRC/tests/fp4_quant.py" "$SRC" "$T/nvfp4" nvfp4
python3 "$ATTNLAB_SRC/tests/int4ct_quant.py" "$SRC" "$T/int4"
python3 "$ATTNLAB_SRC/tests/fp4_quant.py" "$SRC" "$T/ctnvfp4" ctnvfp4
python3 "$ATTNLAB_SRC/tests/fp8ct_quant.py" "$SRC" "$T/fp8t" tensor

# ---- FaRR export of an FP4 / INT4 source: the re-encoded line names what the weights were stored in
for enc in mxfp4 nvfp4 int4; do
    ENC=$(tr a-z A-Z <<<"$enc")
    out=$(e "load $T/$enc; truncate vo tau 0.9 layers 1; export $T/farr-$enc format dense")
    ok "$enc farr export: re-encoded $ENC -> BF16 [$(grep re-encoded <<<"$out")]" \
        has "$out" "^re-encoded 4 changed tensors (.*; layer 1) $ENC -> BF16: added error "
    from=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['reencoded']['from'])" \
        "$T/farr-$enc/farr_manifest.json")
    ok "$enc farr manifest: reencoded.from $ENC (is $from)" test "$from" = "$ENC"
    out=$(e "load $T/$enc; truncate vo tau 0.9 layers 1; export $T/farr8-$enc format dense dtype fp8")
    ok "$enc farr export dtype fp8: refused naming $ENC (said BF16)" \
        has "$out" "^error: export: dtype fp8 keeps an FP8 checkpoint's blocks; $enc is $ENC: use f32, f16 or bf16$"
done

# ---- TransMLA export of an NVFP4 source: the dtype of its attention said, the same as its manifest's
out=$(e "load $T/nvfp4; convert mla kv-rank 16; export $T/mla-nv")
ok "mla export: names BF16 and why [$(grep 'attention tensors' <<<"$out")]" \
    has "$out" "^attention tensors written in BF16: the source's NVFP4 attention is not quantized again"
man=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['attention_dtype'])" "$T/mla-nv/attnlab_manifest.json")
ok "mla export: its manifest says BF16 too (is $man)" test "$man" = BF16
out=$(e "load $T/nvfp4; convert mla kv-rank 16; export $T/mla-nv32 dtype f32")
ok "mla export dtype f32: says the dtype asked" has "$out" "^attention tensors written in float32 (the dtype asked)$"
out=$(e "load $T/nvfp4; convert mla kv-rank 16; export $T/mla-own format attnlab")
ok "mla export format attnlab: float32 (its default)" has "$out" "^attention tensors written in float32: the source's NVFP4"
out=$(e "check $T/mla-nv text $TXT")
ok "check DIR of the BF16 export: the rounding named BF16 [$(grep 'report on' <<<"$out")]" \
    has "$out" "in all 5 layers (the export's rounding: BF16, latent norms)$"
out=$(e "load $T/nvfp4; convert mla kv-rank 16; check")
ok "check of the session (a float32 scratch export): float32" \
    has "$out" "in all 5 layers (the export's rounding: float32, latent norms)$"

# ---- info's compute row in bf16 mode: what ppl says of the same model
for enc in mxfp4 int4 fp8t; do
    out=$(e "load $T/$enc; set compute bf16; info; ppl $TXT")
    row=$(grep '^compute  ' <<<"$out" | sed 's/^compute  *//')
    said=$(grep '^compute bf16 asked' <<<"$out" | sed 's/^compute //')
    ok "$enc: info's compute row is ppl's line [$row] [$said]" test -n "$said" -a "$row" = "$said"
done
out=$(e "load $T/mla-nv; set compute bf16; info")
ok "a BF16 model's compute row: bf16" has "$out" "^compute  *bf16 (activations rounded to BF16"
# generate says it as ppl does (it said nothing: its text in bf16 mode could differ from f32 mode's unexplained)
ok "generate on MXFP4 in bf16 mode: products in float32, said" has "$(e "load $T/mxfp4; set compute bf16; generate 'Once' tokens 3")" \
    "^compute bf16 asked, but the weights are MXFP4: products in float32"
ok "generate on BF16 in bf16 mode: said" has "$(e "load $T/mla-nv; tokenizer $SRC/tok512.bin; set compute bf16; generate 'Once' tokens 3")" \
    "^compute bf16 (activations rounded to BF16"
ok "generate in f32 mode: no compute line" hasnt "$(e "load $T/mxfp4; generate 'Once' tokens 3")" "^compute"

# ---- GGUF of a quantized model in Q8_0: the line says its weights were quantized again (it said
# "dequantized to Q8_0", a quantized type)
out=$(e "load $T/nvfp4; export $T/nv.gguf dtype q8_0")
ok "gguf q8_0: quantized again, said [$(grep dequantized <<<"$out")]" \
    has "$out" "^  NVFP4 weights dequantized to float32, then quantized again to Q8_0$"
ok "gguf f32: dequantized to F32 (unchanged)" has "$(e "load $T/nvfp4; export $T/nv32.gguf dtype f32")" \
    "^  NVFP4 weights dequantized to F32$"

# ---- lint of folders with scales load refuses: the same verdict as load, naming the tensor
python3 "$ATTNLAB_SRC/tests/fp4_quant.py" "$SRC" "$T/mx-nan" mxfp4 nan-scale
python3 "$ATTNLAB_SRC/tests/fp8blk_quant.py" "$SRC" "$T/blk-nan" f32 nan-scale
# patch FOLDER DST TENSOR STRUCT_FORMAT VALUE: a copy with the first value of TENSOR replaced
patch() {
    python3 - "$@" <<'PY'
import json, shutil, struct, sys
src, dst, name, fmt, val = sys.argv[1:6]
shutil.copytree(src, dst)
p = dst + '/model.safetensors'
b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
at = 8 + n + json.loads(b[8:8 + n])[name]['data_offsets'][0]
v = bytes.fromhex(val) if fmt == 'hex' else struct.pack(fmt, float(val))
b[at:at + len(v)] = v
open(p, 'wb').write(b)
PY
}
Q0=model.layers.0.self_attn.q_proj.weight
patch "$T/nvfp4" "$T/nv-inf" ${Q0}_scale_2 '<f' inf
patch "$T/ctnvfp4" "$T/ct-zero" ${Q0}_global_scale '<f' 0
patch "$T/int4" "$T/int4-inf" ${Q0}_scale hex 807f
patch "$T/fp8t" "$T/fp8-minf" ${Q0}_scale '<f' -inf
for d in nv-inf ct-zero int4-inf fp8-minf mx-nan blk-nan; do
    run -e "load $T/$d; ppl $TXT"
    ok "$d: load / ppl refuse it" test "$(rc)" != 0
    why=$(grep -m1 '^error' err.txt | sed 's/^error: //; s/^forward pass, layer [0-9]*: //')
    out=$(e "lint $T/$d")
    ok "$d lint: transformers loads, but computes a different model" \
        has "$out" "^transformers  *LlamaForCausalLM  *loads, but computes a different model"
    ok "$d lint: an error quoting load's [$why]" has "$out" "error .*quantized weight has a NaN or infinite scale.*(first: $(
        sed 's/[][\.*^$]/\\&/g' <<<"$why")"
done
for d in nvfp4 ctnvfp4 int4 fp8t; do
    ok "$d lint (scales fine): no scale error" hasnt "$(e "lint $T/$d")" "NaN or infinite scale"
done
# FP4 / INT4 block scales are read up to a budget (1 GiB; ATTNLAB_LINT_SCALE_BYTES): past it, said
out=$(ATTNLAB_LINT_SCALE_BYTES=0 "$ATTNLAB" -e "lint $T/nv-inf" 2>&1)
ok "budget 0: the NVFP4 weights' scales not read, said" \
    has "$out" "advisory .*the block scales of 30 FP4 / INT4 weights were not read (past lint's 0 bytes of them)"
ok "budget 0: so no scale error" hasnt "$out" "NaN or infinite scale"
ok "budget 0: FP8 scales are still read" \
    has "$(ATTNLAB_LINT_SCALE_BYTES=0 "$ATTNLAB" -e "lint $T/fp8-minf" 2>&1)" "error .*NaN or infinite scale"

cli_done
