#!/usr/bin/env bash
# cli_review_quant.sh -- what a new user's review of issues 28 / 32 found misleading in the lines that
# report an export of a quantized model (stories260K-hf written in MXFP4, NVFP4 and compressed-tensors
# INT4 by tests/fp4_quant.py / int4ct_quant.py):
# - a FaRR export's "re-encoded" line (and its manifest's reencoded.from) named the rewritten FP4 / INT4
#   weights "BF16 -> BF16": they were stored MXFP4 / NVFP4 / INT4 and are written in BF16.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-review-quant
SRC="${ATTNLAB_MODELS:-}/stories260K-hf"
[ -f "$SRC/config.json" ] || { echo "SKIP: $SRC not found"; exit 77; }
TXT="$ATTNLAB_SRC/examples/tinystory.txt"

python3 "$ATTNLAB_SRC/tests/fp4_quant.py" "$SRC" "$T/mxfp4" mxfp4
python3 "$ATTNLAB_SRC/tests/fp4_quant.py" "$SRC" "$T/nvfp4" nvfp4
python3 "$ATTNLAB_SRC/tests/int4ct_quant.py" "$SRC" "$T/int4"

# ---- FaRR export of an FP4 / INT4 source: the re-encoded line names what the weights were stored in
for enc in mxfp4 nvfp4 int4; do
    ENC=$(tr a-z A-Z <<<"$enc")
    out=$(e "load $T/$enc; truncate vo tau 0.9 layers 1; export $T/farr-$enc format dense")
    ok "$enc farr export: re-encoded $ENC -> BF16 [$(grep re-encoded <<<"$out")]" \
        has "$out" "^re-encoded 2 changed tensors (.*; layer 1) $ENC -> BF16: added error "
    from=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['reencoded']['from'])" \
        "$T/farr-$enc/farr_manifest.json")
    ok "$enc farr manifest: reencoded.from $ENC (is $from)" test "$from" = "$ENC"
done

cli_done
