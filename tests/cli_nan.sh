#!/usr/bin/env bash
# cli_nan.sh -- NaN weights are never reported as a small error (issue 14): a demo-llama copy with
# one NaN in layer 1's o_proj; `convert tpa` / `convert mla` print nan for that layer with a note
# saying why, `check` of both conversions fails (TPA's exactness claim no longer says PASS),
# `compare` refuses naming the weight, and `fuse` gives the NaN message `ranks` and `spectrum` give instead of
# LAPACK's "illegal argument".
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-nan
cd "$T" || exit 1
command -v python3 >/dev/null || { echo "python3 needed to plant a NaN: skipped"; exit 77; }

# nanify DIR SUBSTR: element 0 of the first tensor whose name holds SUBSTR becomes NaN
nanify() {
    python3 - "$1" "$2" <<'PY'
import glob, json, os, struct, sys
d, sub = sys.argv[1], sys.argv[2]
for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
    with open(f, "r+b") as fp:
        n = struct.unpack("<Q", fp.read(8))[0]
        h = json.loads(fp.read(n))
        for k, v in h.items():
            if k == "__metadata__" or sub not in k:
                continue
            fp.seek(8 + n + v["data_offsets"][0])
            fp.write({"BF16": b"\xc0\x7f", "F16": b"\x00\x7e", "F32": b"\x00\x00\xc0\x7f"}[v["dtype"]])
            sys.exit(0)
sys.exit(1)
PY
}

run -e "synth demo-llama nl"
[ "$(rc)" = 0 ] && nanify nl "layers.1.self_attn.o_proj" || { fail "NaN model: [$(cat err.txt)]"; cli_done; exit; }

# convert tpa: the exact conversion's layer 1 errors are nan, with the note; its check fails
run -e "load nl; convert tpa kv-rank 2 to tpa.csv; check"
[ "$(rc)" = 1 ] || fail "tpa check on NaN weights: rc $(rc) [$(cat out.txt)]"
grep -q "note: layer 1's errors are NaN: the weights compared hold NaN/Inf" out.txt || fail "tpa note: [$(cat out.txt)]"
grep -q "PASS" out.txt && fail "tpa check says PASS on NaN: [$(cat out.txt)]"
grep -q "check failed: layer 1's errors are NaN" err.txt || fail "tpa check error: [$(cat err.txt)]"
grep -q "o_proj.weight' has 1 NaN/Inf" err.txt || fail "the warning names the tensor: [$(cat err.txt)]"
awk -F, '$1 == 1 { exit !($7 == "nan") }' tpa.csv || fail "tpa.csv out_err of layer 1: [$(cat tpa.csv)]"
awk -F, '$1 == 2 { exit !($7 < 1e-5) }' tpa.csv || fail "tpa.csv layer 2 stays exact: [$(cat tpa.csv)]"

# convert mla: nan in the report and in check, which fails
run -e "load nl; convert mla kv-rank 48 rope-dim 16 to mla.csv; check to chk.csv"
[ "$(rc)" = 1 ] && grep -q "check failed: layer 1's errors are NaN" err.txt || fail "mla check: rc $(rc) [$(cat err.txt)]"
awk -F, '$1 == 1 { exit !($6 == "nan") }' mla.csv || fail "mla.csv out_err of layer 1: [$(cat mla.csv)]"
awk -F, '$1 == 1 { exit !($3 == "nan") }' chk.csv || fail "chk.csv out_err of layer 1: [$(cat chk.csv)]"
[ "$(grep -c "note: layer 1's errors are NaN" out.txt)" = 2 ] || fail "mla notes: [$(cat out.txt)]"

# compare: refused with the NaN message naming the weight, never 0 nor LAPACK's "illegal argument"
run -e "load nl; compare kv-budget 64 layers 1 to cmp.csv"
[ "$(rc)" = 1 ] && grep -q "compare, layer 1: W_O holds NaN/Inf (first at \[0, 0\])" err.txt && [ ! -e cmp.csv ] \
    || fail "compare: rc $(rc) [$(cat err.txt)]"
grep -q "LAPACK" err.txt && fail "compare shows LAPACK: [$(cat err.txt)]"
run -e "load nl; compare kv-budget 64 layers 2-3"
[ "$(rc)" = 0 ] || fail "compare of the clean layers: rc $(rc) [$(cat err.txt)]"

# fuse / spectrum / ranks: the same NaN message, no LAPACK
run -e "load nl; fuse vo layer 1 head 0"
[ "$(rc)" = 1 ] && grep -q "layer 1 head 0 (VO): .*holds NaN/Inf" err.txt || fail "fuse: rc $(rc) [$(cat err.txt)]"
grep -q "LAPACK" err.txt && fail "fuse shows LAPACK: [$(cat err.txt)]"
run -e "load nl; spectrum vo layer 1 head 0"
[ "$(rc)" = 1 ] && grep -q "holds NaN/Inf" err.txt && ! grep -q "LAPACK" err.txt || fail "spectrum: [$(cat err.txt)]"
run -e "load nl; ranks vo layer 1"
[ "$(rc)" = 1 ] && grep -q "holds NaN/Inf" err.txt || fail "ranks: [$(cat err.txt)]"
# NaN in several heads' columns of one tensor, read head by head (truncate, fuse): ONE warning for
# the tensor with its whole count, not one per head block
# NaN at row 5 of layer 1's o_proj (BF16) in columns COL... of the model in DIR
plant_row5_nans() {
    python3 - "$@" <<'PY'
import json, os, struct, sys
f = os.path.join(sys.argv[1], "model.safetensors")
with open(f, "r+b") as fp:
    n = struct.unpack("<Q", fp.read(8))[0]
    t = json.loads(fp.read(n))["model.layers.1.self_attn.o_proj.weight"]
    for col in map(int, sys.argv[2:]):
        fp.seek(8 + n + t["data_offsets"][0] + 2 * (5 * t["shape"][1] + col))
        fp.write(b"\xc0\x7f")
PY
}
run -e "synth demo-llama nm"
plant_row5_nans nm 3 40 100 200 || fail "planting NaNs in several heads"   # heads 0, 1, 3, 6 of 32 columns
run -e "load nm; truncate vo rank 8 policy layer-max; fuse vo layer 1 head 3; fuse vo layer 1 head 6"
[ "$(grep -c 'NaN/Inf values' err.txt)" = 1 ] || fail "one warning per tensor: [$(grep NaN err.txt)]"
grep -q "o_proj.weight' has 4 NaN/Inf values (first at \[5, 3\])" err.txt || fail "whole count: [$(cat err.txt)]"

# a NaN in head 6's columns only: the rank table's error names head 6, not the first head of the
# batch its Gram was computed in (the fast route packs o_proj's heads four at a time)
run -e "synth demo-llama n6"
plant_row5_nans n6 200 || fail "planting a NaN in head 6"
run -e "load n6; ranks vo layer 1"
[ "$(rc)" = 1 ] && grep -q "layer 1 head 6 (VO): .*holds NaN/Inf" err.txt || fail "ranks names head 6: [$(cat err.txt)]"

cli_done
