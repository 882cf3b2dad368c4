#!/usr/bin/env bash
# cli_farr_identity.sh -- one question, one answer, over EVERY family with a synth recipe (the
# usage line of `synth family` lists them, so a new row is checked without editing this file):
#   - `truncate vo rank 32` (full rank: every head keeps all its values) leaves ppl equal to the
#     source's to 1e-6 relative; `export DIR format dense; check DIR` passes and DIR loaded
#     gives the source's ppl;
#   - `truncate vo rank 8` exported dense, checked and reloaded gives the working copy's ppl
#     (1e-5 relative);
#   - the same for `truncate qk rank 32` / `rank 4` where QK fusion applies (partial rotary, MLA);
#   - the cut's `format factors` export reloads to the dense one's ppl; MLA models' `format hf`
#     (policy model-max) keeps the source's ppl at full rank and the working copy's cut;
#   - GPT-2 (demo-gpt2, tests/models/gpt2-tiny-random: V bias folded into c_proj's bias) alike.
# A family may refuse a step only with one of the known refusals below (full RoPE or Q/K norms
# for qk; a working copy the evaluator cannot run); the test counts what it checked and fails
# if a family refuses with anything else or checks too few. Hybrids (Gated DeltaNet layers)
# truncate their softmax-attention layers, named by the refusal of the whole model; MLA with
# DeepSeek's lightning indexer (index_topk 8) is measured on 8 tokens, where it selects all. DeepSeek-V4 has no
# forward pass (its compressed attention and hyper-connections are not built): its refusal is a known one.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-farr-identity shared-cache
cd "$T" || exit 1

seq 1 40 | awk '{printf "%d ", ($1*37)%250+1}' >x40.ids
seq 1 8 | awk '{printf "%d ", ($1*37)%250+1}' >x8.ids
fams=$("$B" -e "help synth family" | sed -n 1p | sed 's/^usage: synth family //; s/ DIR.*//' | tr '|' ' ')
[ "$(wc -w <<<"$fams")" -ge 20 ] || fail "the recipes from the usage line: [$fams]"
REFUSALS='QK fusion refused|Q/K RMSNorm|llama_4_scaling_beta|which attnlab does not build'   # the last: DeepSeek-V4's and Kimi-K3's forward pass
EVAL_REFUSALS='llama_4_scaling_beta'   # the one-layer evaluator's: exports run (Gemma 4 and the output gate run in it)

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

# check_pair KIND FULL CUT: the full-rank identity and the cut export's round trip of one pair of
# the model $src (named $f; exports in $T/$f-...).
check_pair() {
    local k=$1 full=$2 cut=$3 tr p1 p3 p4 p5 pe tid=1e-6
    # Gemma 4: the session's evaluator and the forward pass agree to ~3e-6 there (RoPE in double vs float tables, the
    # scale-1 logits of normed q / k); its export at full rank is the source bit for bit (1e-6 below)
    case $f in gemma4*) tid=1e-5 ;; esac
    tr="truncate $k rank $full $lay"
    p1=$(ppl_of "load $src; $tr; ppl ids $X")
    case $p1 in
        ERR:*) grep -Eq "$EVAL_REFUSALS" <<<"$p1" || { refused "$f $tr" "$p1"; return; }
               refused "$f $tr: ppl" "$p1" ;;    # the working copy's: its export still runs
        *) near "$p1" "$p0" "$tid" || fail "$f: $tr changes ppl $p0 -> $p1" ;;
    esac
    export_check "$src" "$tr" "$T/$f-$k$full"
    pe=$(ppl_of "load $T/$f-$k$full; ppl ids $X")
    near "$pe" "$p0" 1e-6 || fail "$f: the $k rank $full export's ppl $pe, the source's $p0"
    tr="truncate $k rank $cut $lay"
    p3=$(ppl_of "load $src; $tr; ppl ids $X")
    export_check "$src" "$tr" "$T/$f-$k$cut"
    p4=$(ppl_of "load $T/$f-$k$cut; ppl ids $X")
    "$B" -e "load $src; $tr; export $T/$f-$k${cut}f format factors" >/dev/null 2>&1 || fail "$f: $tr: export factors"
    p5=$(ppl_of "load $T/$f-$k${cut}f; ppl ids $X")
    near "$p5" "$p4" 1e-5 || fail "$f: $tr: dense export ppl $p4, factors export $p5"
    case $p3 in ERR:*) [ "${p1:0:4}" = "ERR:" ] || fail "$f: $tr: $p3" ;;
        *) near "$p4" "$p3" 1e-5 || fail "$f: $tr: working copy ppl $p3, its dense export $p4" ;; esac
    near "$p4" "$p0" 1e-6 && fail "$f: $tr leaves ppl unchanged ($p4): the cut is not measured"
    if [ "${p1:0:4}" = "ERR:" ]; then npart=$((npart + 1)); else nok=$((nok + 1)); fi
}

# check_hf KIND FULL CUT: an MLA model's `format hf` export (one rank: policy model-max) at full
# rank keeps the source's ppl, cut it reloads to the working copy's.
check_hf() {
    local k=$1 tr p1 p2
    for r in $2 $3; do
        tr="truncate $k rank $r policy model-max"
        p1=$(ppl_of "load $src; $tr; ppl ids $X; export $T/$f-h$k$r format hf")
        p2=$(ppl_of "load $T/$f-h$k$r; ppl ids $X")
        near "$p2" "$p1" 1e-5 || fail "$f: $tr: working copy ppl $p1, its hf export $p2"
        [ "$r" = "$2" ] && { near "$p2" "$p0" 1e-6 || fail "$f: $tr: hf export ppl $p2, the source's $p0"; }
    done
    nhf=$((nhf + 1))
}

# setup_model: $lay (a hybrid's softmax-attention layers; Gemma 4: the first run of layers truncate takes, which
# its refusal of a k_eq_v / KV-shared layer names), $X (8 tokens under an indexer's index_topk) and $p0, the
# source's ppl; false when the source has none.
setup_model() {
    X=x40.ids lay=
    e=$(ppl_of "load $src; truncate vo rank 32; ppl ids $X")
    case $e in *"softmax-attention layers are"*) lay="layers $(sed 's/.*softmax-attention layers are //; s/[^0-9-].*//' <<<"$e")" ;; esac
    case $e in *"truncate the other layers (\`layers "*) lay=$(sed 's/.*truncate the other layers (`\(layers [0-9-]*\)`.*/\1/' <<<"$e") ;; esac
    case $e in *index_topk*) X=x8.ids ;; esac
    p0=$(ppl_of "load $src; ppl ids $X")
    case $p0 in ERR:*"layers, which attnlab does not build"*) refused "$f" "$p0"; return 1 ;; esac   # DeepSeek-V4, Kimi-K3
    case $p0 in ERR:*) fail "$f: source ppl: $p0"; return 1 ;; esac
}

nok=0 npart=0 nref=0 nhf=0
for f in $fams; do
    src=$T/$f
    "$B" -e "synth family $f $src" >/dev/null 2>&1 || { fail "synth family $f"; continue; }
    setup_model || continue
    check_pair vo 32 8
    check_pair qk 32 4
    if "$B" -e "load $src; info" 2>/dev/null | grep -Eq "^kv_lora_rank +[1-9]"; then
        check_hf vo 32 8
        check_hf qk 32 4
    fi
done
# GPT-2 (MHA, Conv1D, V bias folded into c_proj's: no sinks) as demo and as a real tiny checkpoint
# (its one random head's scores are so small that no QK cut moves its ppl past 1e-6: VO only)
src=demo-gpt2 f=demo-gpt2
if setup_model; then check_pair vo 1024 8; check_pair qk 1024 4; fi
src=$(cd "$(dirname "$0")" && pwd)/models/gpt2-tiny-random f=gpt2-tiny-random
if setup_model; then check_pair vo 1024 4; fi
echo "checked $nok (model, pair) cases in full, $npart through their exports only, $nhf MLA hf exports, $nref known refusals"
[ "$nok" -ge 29 ] || fail "only $nok (model, pair) cases checked"
[ "$nhf" -ge 6 ] || fail "only $nhf MLA hf exports checked"
cli_done
