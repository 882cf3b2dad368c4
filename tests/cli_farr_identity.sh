#!/usr/bin/env bash
# cli_farr_identity.sh -- one question, one answer, over EVERY family with a synth recipe (the
# usage line of `synth family` lists them, so a new row is checked without editing this file):
#   - `truncate vo rank 32` (full rank: every head keeps all its values) leaves ppl equal to the
#     source's to 1e-6 relative; `export DIR format dense; check DIR` passes and DIR loaded
#     gives the source's ppl;
#   - `truncate vo rank 8` exported dense, checked and reloaded gives the working copy's ppl
#     (1e-5 relative);
#   - the same for `truncate qk rank 32` / `rank 4` where QK fusion applies (partial rotary, MLA).
# A family may refuse a step only with one of the known refusals below (full RoPE or Q/K norms
# for qk; a working copy the evaluator cannot run); the test counts what it checked and fails
# if a family refuses with anything else or checks too few. Hybrids (Gated DeltaNet layers)
# truncate their softmax-attention layers, named by the refusal of the whole model; MLA with
# DeepSeek's lightning indexer (index_topk 8) is measured on 8 tokens, where it selects all.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-farr-identity shared-cache
cd "$T" || exit 1

seq 1 40 | awk '{printf "%d ", ($1*37)%250+1}' >x40.ids
seq 1 8 | awk '{printf "%d ", ($1*37)%250+1}' >x8.ids
fams=$("$B" -e "help synth family" | sed -n 1p | sed 's/^usage: synth family //; s/ DIR.*//' | tr '|' ' ')
[ "$(wc -w <<<"$fams")" -ge 20 ] || fail "the recipes from the usage line: [$fams]"
REFUSALS='QK fusion refused|Q/K RMSNorm|llama_4_scaling_beta|attention output is gated'
EVAL_REFUSALS='llama_4_scaling_beta|attention output is gated'   # the one-layer evaluator's: exports run

# ppl_of CMDS: the last ppl the commands print (json), or ERR: the error.
ppl_of() {
    "$B" -e "set format json; $1" >o.txt 2>e.txt
    local p
    p=$(grep -o '"ppl": [0-9.e+-]*' o.txt | tail -1 | sed 's/"ppl": //')
    if [ -n "$p" ] && ! grep -q '^error' e.txt; then echo "$p"; else echo "ERR: $(grep -m1 '^error' e.txt)"; fi
}
# near A B TOL: |A - B| <= TOL |B|
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; exit !(d <= t * b) }'; }
# refused WHAT RESULT: a known refusal (counted), or a failure
refused() {
    if grep -Eq "$REFUSALS" <<<"$2"; then nref=$((nref + 1)); echo "refused: $1: ${2:0:110}"
    else fail "$1: $2"; fi
}

# export_check F TRUNCATE DIR: export dense, then `check DIR`: its fused maps PASS; the layer
# comparison after it may meet only an evaluator refusal.
export_check() {
    "$B" -e "load $1; $2; export $3 format dense; check $3" >o.txt 2>&1 ||
        grep -Eq "$EVAL_REFUSALS" <<<"$(grep -m1 '^error' o.txt)" || fail "$1: $2: export dense + check: $(grep -m1 '^error' o.txt)"
    grep -q "^PASS: the export's fused maps are the plan's" o.txt || fail "$1: $2: check: [$(grep -m1 -E '^FAIL|^error' o.txt)]"
}

# check_pair F KIND FULL CUT: the full-rank identity and the cut export's round trip of one pair.
check_pair() {
    local f=$1 k=$2 full=$3 cut=$4 tr p1 p3 p4 pe
    tr="truncate $k rank $full $lay"
    p1=$(ppl_of "load $f; $tr; ppl ids $X")
    case $p1 in
        ERR:*) grep -Eq "$EVAL_REFUSALS" <<<"$p1" || { refused "$f $tr" "$p1"; return; }
               refused "$f $tr: ppl" "$p1" ;;    # the working copy's: its export still runs
        *) near "$p1" "$p0" 1e-6 || fail "$f: $tr changes ppl $p0 -> $p1" ;;
    esac
    export_check "$f" "$tr" "$f-$k$full"
    pe=$(ppl_of "load $f-$k$full; ppl ids $X")
    near "$pe" "$p0" 1e-6 || fail "$f: the $k rank $full export's ppl $pe, the source's $p0"
    tr="truncate $k rank $cut $lay"
    p3=$(ppl_of "load $f; $tr; ppl ids $X")
    export_check "$f" "$tr" "$f-$k$cut"
    p4=$(ppl_of "load $f-$k$cut; ppl ids $X")
    case $p3 in ERR:*) [ "${p1:0:4}" = "ERR:" ] || fail "$f: $tr: $p3" ;;
        *) near "$p4" "$p3" 1e-5 || fail "$f: $tr: working copy ppl $p3, its dense export $p4" ;; esac
    near "$p4" "$p0" 1e-6 && fail "$f: $tr leaves ppl unchanged ($p4): the cut is not measured"
    if [ "${p1:0:4}" = "ERR:" ]; then npart=$((npart + 1)); else nok=$((nok + 1)); fi
}

nok=0 npart=0 nref=0
for f in $fams; do
    "$B" -e "synth family $f $f" >/dev/null 2>&1 || { fail "synth family $f"; continue; }
    X=x40.ids lay=
    e=$(ppl_of "load $f; truncate vo rank 32; ppl ids $X")
    case $e in *"softmax-attention layers are"*) lay="layers $(sed 's/.*softmax-attention layers are //; s/[^0-9-].*//' <<<"$e")" ;; esac
    case $e in *index_topk*) X=x8.ids ;; esac
    p0=$(ppl_of "load $f; ppl ids $X")
    case $p0 in ERR:*) fail "$f: source ppl: $p0"; continue ;; esac
    check_pair "$f" vo 32 8
    check_pair "$f" qk 32 4
done
echo "checked $nok (family, pair) cases in full, $npart through their exports only, $nref known refusals"
[ "$nok" -ge 25 ] || fail "only $nok (family, pair) cases checked"
cli_done
