#!/usr/bin/env bash
# cli_compute_rule.sh -- what `set compute bf16` changes, and that `ppl` / `info` say it truly. The rule
# (model_compute_note): bf16 mode rounds the activations of the products of weights stored in BF16 and
# of nothing else; F32 / F16 / FP8 / FP4 / INT4 weights keep float32 products. Found by the integrator's
# review of issue 28 / 32:
# - the line was decided by config.json's torch_dtype, not by the tensors: a FaRR `format dense dtype
#   bf16` export of an F32 model (its rewritten v/o BF16, the rest F32, torch_dtype float32) was said to
#   run "products in float32, as in f32 mode" while its BF16 tensors took BF16 products (another number);
#   the same held for a TransMLA `dtype f32` export of a BF16 source (attention F32, MLP BF16).
# - the MLP's SiLU took a vector exp in bf16 mode whatever the weights, so an all-F32 model's "as in f32
#   mode" was off in the last digits (nll 1.42839499 -> 1.42839507 on stories260K).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-compute-rule
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"

# ---- an all-F32 model: bf16 mode is f32 mode, bit for bit, and says so
f32=$(e "load $SRC; set format csv; ppl $TXT")
b16=$(e "load $SRC; set compute bf16; set format csv; ppl $TXT")
ok "F32 model in bf16 mode: said 'as in f32 mode'" has "$b16" "^compute bf16 asked, but the weights are F32: products in float32, as in f32 mode"
ok "F32 model in bf16 mode: the same numbers as f32 mode [$(grep -v '^compute' <<<"$b16" | tail -1)] [$(tail -1 <<<"$f32")]" \
    test "$(grep -v '^compute\|tok/s' <<<"$b16" | tail -3)" = "$(grep -v '^compute\|tok/s' <<<"$f32" | tail -3)"

# ---- a mixed model: FaRR's dense export in BF16 of an F32 source (layer 1's v/o BF16, the rest F32)
e "load $SRC; truncate vo tau 0.9 layers 1; export $T/mixed format dense dtype bf16" > /dev/null
python3 - "$T/mixed" <<'EOF' || fail "the dense bf16 export is not mixed"
import json, struct, sys, glob
d = {}
for f in glob.glob(sys.argv[1] + "/*.safetensors"):
    b = open(f, "rb").read(8); n = struct.unpack("<Q", b)[0]
    h = json.loads(open(f, "rb").read(8 + n)[8:])
    d.update({k: v["dtype"] for k, v in h.items() if k != "__metadata__"})
assert d["model.layers.1.self_attn.v_proj.weight"] == "BF16", d["model.layers.1.self_attn.v_proj.weight"]
assert d["model.layers.0.self_attn.v_proj.weight"] == "F32"
EOF
mf=$(e "load $T/mixed; set format csv; ppl $TXT")
mb=$(e "load $T/mixed; set compute bf16; info; set format csv; ppl $TXT")
line=$(grep '^compute bf16' <<<"$mb")
ok "mixed model in bf16 mode: not said to be f32 mode [$line]" hasnt "$mb" "as in f32 mode"
ok "mixed model in bf16 mode: the BF16 weights' products rounded, the others named" \
    has "$mb" "^compute bf16 (activations rounded to BF16.*) for its BF16 weights only: attention F32.*keep float32 products"
ok "mixed model in bf16 mode: info's compute row is ppl's line" \
    test "$(grep '^compute  ' <<<"$mb" | sed 's/^compute  *//')" = "$(sed 's/^compute //' <<<"$line")"
ok "mixed model: bf16 mode's number differs from f32 mode's (BF16 products happened)" \
    test "$(grep -v '^compute\|tok/s' <<<"$mb" | tail -1)" != "$(grep -v '^compute\|tok/s' <<<"$mf" | tail -1)"
cli_done
