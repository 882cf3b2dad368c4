#!/usr/bin/env bash
# results_digest.sh BIN OUTDIR -- the proof that a refactoring changed no result: runs a fixed
# battery of attnlab commands with the binary BIN and writes into OUTDIR (emptied first)
#   cases/NAME.txt    one file per case: the command line, its stdout + stderr, its exit status
#   exports.sha256    sha256 of every file every export wrote (exp/, by relative path)
#   figures.sha256    sha256 of every PNG / CSV / JSON a `to FILE` or `info to` wrote (fig/)
#   synth.sha256      sha256 of every checkpoint `synth` wrote (syn/) and of the demo models
#                     `load demo-*` generated into the private cache (cache/)
#   families.txt      the families `synth family` offers, sorted (its usage line, or its error for an
#                     unknown one)
#   work/             everything written (cwd of every case; cache/ is ATTNLAB_CACHE, home/ ATTNLAB_HOME)
# The battery: per model (demo-r1/-llama/-gpt2/-kvnorm and some dtype variants, the small real
# checkpoints in tests/models, and a `synth family` checkpoint of every family BIN offers) info,
# ranks vo / qk, spectrum, energy and rank figures, ppl on token ids (and text where a tokenizer
# is beside the model), lint of the folder, truncate + export (factors, dense, hf, gguf) + check,
# convert mla + export + check + lint, convert tpa + export + check, kvsvd + export + check,
# compare; then the method figures (TransMLA, KQ-SVD, compare), diff ranks, kv-cache, the Lua
# module and the repository's notebooks. A refusal is a result too: every case runs, its status
# is recorded. The models' folders are copied into work/ and every path given is relative, so
# the outputs name no machine path. ~25 s of CPU; ~680 MB written.
# Not deterministic, so normalised in the case files (sed): OUTDIR -> @OUT@, the repository ->
# @SRC@, seconds and rates ("0.12 s", "35.1 tok/s"); JSON files are hashed with OUTDIR replaced
# (export manifests record the source's absolute path). A binary file that holds a path (none
# today) would hash equal only for OUTDIRs of equal length (scripts/results_same.sh uses such).
# scripts/results_same.sh OLD_BIN NEW_BIN runs this twice and diffs.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BIN OUTDIR" >&2; exit 2; }
BIN=$(realpath "$1")
[ -x "$BIN" ] || { echo "$0: $1 is not an executable" >&2; exit 2; }
mkdir -p "$2"
OUT=$(cd "$2" && pwd -P)
SRC=$(cd "$(dirname "$0")/.." && pwd -P)
rm -rf "$OUT/cases" "$OUT/work" "$OUT"/*.sha256 "$OUT/families.txt"
mkdir -p "$OUT/cases" "$OUT/work/exp" "$OUT/work/fig" "$OUT/work/syn"
W=$OUT/work
export ATTNLAB_CACHE=$W/cache ATTNLAB_HOME=$W/home LC_ALL=C
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
unset HF_HUB_CACHE HF_HOME
cd "$W"
cp -r "$SRC/tests/models" models
cp "$SRC/examples/tinystory.txt" story.txt
# 48 token ids below 256 (every model's vocabulary is at least that)
for i in $(seq 1 48); do echo $(((i * 37 + 11) % 256)); done | tr '\n' ' ' >ids.txt

norm() {
    sed -E -e "s|$OUT|@OUT@|g" -e "s|$SRC|@SRC@|g" \
        -e 's/[0-9]+\.[0-9]+ s\b/#.## s/g' -e 's/[0-9.]+ (tok|layers?|steps?)\/s/# \1\/s/g' \
        -e 's/~[0-9]+s left//g'
}

# c NAME CMDS: one case; attnlab -e CMDS from $W, output normalised into cases/NAME.txt
c() {
    local f=$OUT/cases/$1.txt rc=0
    "$BIN" -e "$2" </dev/null >"$f.raw" 2>&1 || rc=$?
    { echo "\$ attnlab -e \"$2\""; norm <"$f.raw"; echo "[exit $rc]"; } >"$f"
    rm -f "$f.raw"
}

# nb NAME ARGS...: one case running a Lua notebook (attnlab FILE.lua ARGS) from $W
nb() {
    local f=$OUT/cases/$1.txt rc=0
    shift
    "$BIN" "$@" </dev/null >"$f.raw" 2>&1 || rc=$?
    { echo "\$ attnlab $*"; norm <"$f.raw"; echo "[exit $rc]"; } >"$f"
    rm -f "$f.raw"
}

# battery TAG LOAD MLA_RANK [LAYER]: the analyses of one model (LOAD: what `load` takes; LAYER:
# the layer of the one-head views, default 1)
battery() {
    local t=$1 l=$2 r=$3 h=${4:-1} e=exp/$1 g=fig/$1
    mkdir -p "$g"
    c "$t.info" "load $l as m; info; info to $g/info.json"
    c "$t.ranks-vo" "load $l as m; ranks vo all heads; ranks vo all summary tau 0.99; ranks vo all to $g/vo.csv"
    c "$t.ranks-qk" "load $l as m; ranks qk all heads"
    c "$t.ranks-qk-offset" "load $l as m; ranks qk all heads offset 3 to $g/qk-offset.csv"
    c "$t.spectrum" "load $l as m; spectrum v layer $h head 0; spectrum o layer $h head 0; spectrum q layer 0 head 0; spectrum k layer 0 head 0; spectrum vo layer $h head 0 to $g/spec-vo.csv"
    c "$t.spectrum-qk" "load $l as m; spectrum qk layer $h head 0"
    c "$t.spectrum-qk-offset" "load $l as m; spectrum qk layer $h head 0 offset 3"
    c "$t.energy" "load $l as m; plot energy vo layer $h head 0 to $g/energy.png; plot energy k layer 0 head 0 scale linear to $g/energy-lin.png; plot spectrum vo layer $h head 0 to $g/spectrum.png"
    c "$t.rank-figs" "load $l as m; plot vo-ranks layer $h to $g/vo-l1.png; plot vo-ranks all to $g/vo-grid.png; plot ranks-by-layer vo to $g/rbl.png"
    c "$t.fuse" "load $l as m; fuse vo layer $h head 0; fused info; fused sigma"
    c "$t.ppl" "load $l as m; ppl ids ids.txt seqlen 24; ppl ids ids.txt seqlen 48 to $g/ppl.csv"
    c "$t.ppl-text" "load $l as m; ppl story.txt seqlen 32 max-tokens 96"
    c "$t.truncate" "load $l as m; truncate vo tau 0.99 policy layer-max; ppl ids ids.txt seqlen 24; check tokens 16; export $e-tr-factors format factors; export $e-tr-dense format dense; check $e-tr-dense tokens 16; lint $e-tr-dense"
    c "$t.truncate-rank" "load $l as m; truncate vo rank 3 policy model-max heads to $g/trunc.csv; ppl ids ids.txt seqlen 24; check tokens 16"
    c "$t.truncate-hf" "load $l as m; truncate vo rank 3 policy model-max; export $e-tr-hf format hf; check $e-tr-hf tokens 16"
    c "$t.truncate-qk" "load $l as m; truncate qk rank 4; export $e-trqk-dense format dense; check $e-trqk-dense tokens 16"
    c "$t.truncate-bf16" "load $l as m; truncate vo rank 3; export $e-tr-bf16 format dense dtype bf16; export $e-tr-f16 format factors dtype f16"
    c "$t.truncate-fp8" "load $l as m; truncate vo rank 3; export $e-tr-fp8 format dense dtype fp8"
    c "$t.gguf" "load $l as m; export $e.gguf dtype f32; export $e-q8.gguf dtype q8_0; lint $e.gguf; load $e.gguf as g; info; ppl ids ids.txt seqlen 24"
    c "$t.gguf-truncate" "load $l as m; truncate vo rank 3; export $e-tr.gguf dtype f32"
    c "$t.mla" "load $l as m; convert mla kv-rank $r tokens 16 ppl off; kv-cache; export $e-mla dtype f32; check $e-mla tokens 16; lint $e-mla; load $e-mla as x; info; ppl ids ids.txt seqlen 24"
    c "$t.mla-full" "load $l as m; convert mla kv-rank full tokens 16 ppl off; check; export $e-mla-full; export $e-mla.gguf dtype f32"
    c "$t.tpa" "load $l as m; convert tpa kv-rank 1 tokens 16 ppl off; check; export $e-tpa; check $e-tpa"
    c "$t.tpa-b" "load $l as m; convert tpa k-rank 1 v-rank 2 form b tokens 16 ppl off; check; kv-cache"
    c "$t.kvsvd" "load $l as m; calibrate ids ids.txt samples 2 seqlen 16 to $g/calib.csv; kvsvd learn all rank 2; kvsvd eval to $g/kvsvd.csv; export $e-kq; check $e-kq"
    c "$t.compare" "load $l as m; compare kv-budget 16 tokens 16 to $g/compare.csv"
}

# lint DIR of the models themselves
lints() {
    local t=$1 d=$2
    c "$t.lint" "lint $d; lint $d to fig/$t-lint.json"
}

# --- synth: the demo models and every family -----------------------------------------------
# the families: from `help synth family`'s usage line, else from the error for an unknown one
{ "$BIN" -e "help synth family" </dev/null 2>&1 || true; } |
    sed -n '1s/^usage: synth family \([a-z0-9_|]*\) .*/\1/p' | tr '|' '\n' >"$OUT/families.txt"
[ -s "$OUT/families.txt" ] || { "$BIN" -e "synth family attnlab-no-such-family syn/none" </dev/null 2>&1 || true; } |
    sed -n 's/.*must be one of \([a-z0-9_|]*\),.*/\1/p' | tr '|' '\n' >"$OUT/families.txt"
sort -o "$OUT/families.txt" "$OUT/families.txt"   # a set: the order of the list is no result
[ -s "$OUT/families.txt" ] || { echo "$0: no family list from synth family" >&2; exit 1; }
for d in demo-r1 demo-llama demo-gpt2 demo-kvnorm; do c "synth.$d" "synth $d syn/$d"; done
c "synth.variants" "synth demo-llama syn/demo-llama-f32 dtype f32; synth demo-r1 syn/demo-r1-1 shards 1 seed 7; synth demo-gpt2 syn/demo-gpt2-s9 seed 9"
while read -r f; do
    c "synth.family.$f" "synth family $f syn/$f"
done <"$OUT/families.txt"
for f in qwen3 gemma2 olmo2; do
    if grep -qx "$f" "$OUT/families.txt"; then c "synth.family-bf16.$f" "synth family $f syn/$f-bf16 dtype bf16 seed 9"; fi
done

# --- the models ----------------------------------------------------------------------------
battery demo-r1 demo-r1 16
battery demo-llama demo-llama 48
battery demo-gpt2 demo-gpt2 16
battery demo-kvnorm demo-kvnorm 32
for v in demo-llama-f32 demo-r1-bf16 demo-r1-f32 demo-gpt2-bf16 demo-kvnorm-f32; do
    mkdir -p "fig/$v"
    c "$v.info" "load $v as m; info"
    c "$v.ranks" "load $v as m; ranks vo all heads to fig/$v/vo.csv; ranks vo all summary"
    c "$v.truncate" "load $v as m; truncate vo tau 0.99; export exp/$v-tr-dense format dense; check exp/$v-tr-dense tokens 16; ppl ids ids.txt seqlen 24"
done
battery stories260K models/stories260K/stories260K.bin 16
battery stories260K-hf models/stories260K-hf 16
battery gpt2-tiny-random models/gpt2-tiny-random 8 0
c "stories260K-hf.tokenize" "load models/stories260K-hf as m; tokenize 'Once upon a time'; generate 'Once upon a time' tokens 16; generate 'Once upon a time' tokens 16 temp 0.8 seed 3"
c "stories260K-hf.calib-text" "load models/stories260K-hf as m; calibrate story.txt samples 4 seqlen 32 inputs on; convert mla kv-rank 16 tokens 16; check; kvsvd learn kqsvd rank 4; kvsvd eval"
# the method figures and side-by-side views (fig/x)
mkdir -p fig/x
c "x.diff-ranks" "load demo-llama as a; load demo-llama-f32 as b; diff ranks vo a b; diff ranks vo a b tau 0.99 to fig/x/diff.csv; ranks vo all model b summary"
c "x.heatmap" "load demo-llama as m; plot heatmap vo layer 1 head 0 to fig/x/heat-vo.png; plot heatmap q layer 1 head 0 factor b to fig/x/heat-q.png"
c "x.tmla-figs" "load demo-kvnorm as m; plot key-norms layer 0 to fig/x/kn.png; plot kv-balance layer 0 to fig/x/kvb.png; plot rope-energy layer 0 freqfolds 1,2,4 to fig/x/re.png"
c "x.mla-options" "load demo-kvnorm as m; convert mla kv-rank 24 rope-dim 16 freqfold 2 balance off q-rank 64 tokens 16 ppl off to fig/x/mla.csv; export exp/x-mla-opt dtype bf16 shard-mb 1; check exp/x-mla-opt; export exp/x-mla-opt.gguf dtype f16"
c "x.compare-figs" "load demo-llama as m; compare kv-budget 48 tokens 16; plot compare to fig/x/cmp.png; plot compare-budgets budgets 16,48 tokens 16 to fig/x/cmpb.png"
c "x.kvsvd-figs" "load models/stories260K-hf as m; calibrate story.txt samples 4 seqlen 32; kvsvd learn all rank 3; kvsvd eval; plot kvsvd-errors to fig/x/kv1.png; plot kvsvd-errors what kq log to fig/x/kv1kq.png; plot kvsvd-unbalance betas 1,10 samples 1 to fig/x/kv2.png"
c "x.mla-table" "load models/stories260K-hf as m; convert mla-table kv-ranks 8,16 calib story.txt samples 4 seqlen 32 ppl-tokens 64 to fig/x/mla-table.csv"
c "x.rope-removal" "load models/stories260K-hf as m; plot rope-removal removed 0,0.5 freqfolds 1,2 calib story.txt samples 4 seqlen 32 ppl-tokens 64 data fig/x/rr.csv to fig/x/rr.png"
c "x.kv-cache" "load demo-llama as m; kv-cache to fig/x/kv.csv; kv-cache family tpa-kvonly rk 1 rv 3 bytes 4; kv-cache groups 1"
# Lua: the attn module generated from the command table, and the repository's notebooks
c "x.lua" "lua attn.load('demo-llama'); local r = attn.run('ranks vo layer 1'); print(#r, r[1].rank_v, r[1].rank_vo); print(attn.info().layers, attn.get('tau')); local s = attn.spectrum('vo', {layer = 1, head = 0}); print(#s, s[1].sigma, s[#s].energy); local l, t = attn.truncate('vo', {tau = 0.99}); print(#l, t.params_after)"
mkdir -p nb && cp "$SRC"/scripts/*.lua nb/
nb "nb.info_demos" nb/info_demos.lua demo-r1 demo-llama demo-gpt2
nb "nb.farr_cases" nb/farr_cases.lua demo-r1 0.999
nb "nb.seed000_grids" nb/seed000_grids.lua fig/nb-grids demo-r1
for d in demo-r1 demo-llama demo-gpt2 demo-kvnorm; do lints "$d" "syn/$d"; done
lints stories260K-hf models/stories260K-hf
lints gpt2-tiny-random models/gpt2-tiny-random
while read -r f; do
    battery "family.$f" "syn/$f" 16
    lints "family.$f" "syn/$f"
done <"$OUT/families.txt"

# --- the digests -------------------------------------------------------------------------------
# sums DIR: "sha256  path" of every file under DIR (JSON with OUTDIR normalised), sorted by path
sums() {
    find "$1" -type f | sort | while read -r p; do
        case $p in
            *.json) printf '%s  %s\n' "$(sed "s|$OUT|@OUT@|g" "$p" | sha256sum | cut -c1-64)" "$p" ;;
            *) printf '%s  %s\n' "$(sha256sum <"$p" | cut -c1-64)" "$p" ;;
        esac
    done
}
sums exp >"$OUT/exports.sha256"
sums fig >"$OUT/figures.sha256"
{ sums syn; sums cache; } >"$OUT/synth.sha256"
echo "$(ls "$OUT/cases" | wc -l) cases, $(wc -l <"$OUT/exports.sha256") exported files, $(wc -l <"$OUT/figures.sha256") figures and tables, $(wc -l <"$OUT/synth.sha256") synthetic files in $OUT"
