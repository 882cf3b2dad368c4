#!/usr/bin/env bash
# cli_tmla_qknorm.sh -- `convert mla qk-norm fold|drop` on sources with Q/K RMSNorm (issue 30, 1): per
# head (stories260K-hf rewritten as Qwen3 with q_norm / k_norm: unit gains, and trained-looking gains
# 0.4-3.4; the synthetic qwen3 checkpoint) and over the whole projection (the synthetic olmo2). Without
# the option the conversion is refused with the option named; every line of the report says which
# variant it is (the other balance setting's errors too, against the source); fold (gains and the calibrated 1/RMS folded into W_Q / W_K) stays closer to the
# source than drop (the norm removed, the naive baseline): held-out NLL and the summed per-layer score
# errors against the source with its norm. The fold's export is a DeepSeek-V3 checkpoint that `check
# DIR` measures against the source with its norm. The TransMLA figures, which read x W_K, refuse.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-tmla-qknorm shared-cache
cd "$T" || exit 1
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
story=$ATTNLAB_SRC/examples/tinystory.txt
python3 "$ATTNLAB_SRC/tests/qwen3_norms.py" "$ATTNLAB_MODELS/stories260K-hf" "$T/q3g" gains || fail "qwen3_norms gains"
python3 "$ATTNLAB_SRC/tests/qwen3_norms.py" "$ATTNLAB_MODELS/stories260K-hf" "$T/q3u" unit || fail "qwen3_norms unit"
cli_ids 300 ids.txt

# dnll: |after - before| of the log-perplexity line of out.txt; serr FILE: the summed score_err column
dnll() { sed -n 's/.*perplexity on .*(.*; log \([0-9.]*\) -> \([0-9.]*\)).*/\1 \2/p' out.txt | head -1 |
         awk '{ d = $2 - $1; print (d < 0 ? -d : d) }'; }
serr() { awk -F, 'NR > 1 { s += $5 } END { print s }' "$1"; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# ---- refused without the option, with the option named; info says so
run -e "load $T/q3g; convert mla kv-rank full"
[ "$(rc)" = 1 ] && grep -q "per-head Q/K RMSNorm (Qwen3, Gemma 3), which no MLA latent caches exactly: give qk-norm fold" \
    err.txt || fail "no qk-norm: [$(cat err.txt)]"
run -e "load $T/q3g; info"
grep -Eq "^convert mla +yes: with qk-norm fold\|drop\|keep only: the per-head Q/K RMSNorm" out.txt || fail "info: [$(cat out.txt)]"
run -e "load $T/q3g; plot key-norms"
[ "$(rc)" = 1 ] && grep -q "the TransMLA figures read the linear keys x W_K" err.txt || fail "key-norms: [$(cat err.txt)]"

# ---- stories260K with trained-looking gains: fold against drop (held-out NLL, score errors)
for v in fold drop; do
    run -e "load $T/q3g as q; convert mla kv-rank full qk-norm $v calib $story seqlen 64 to g_$v.csv"
    [ "$(rc)" = 0 ] || fail "gains $v: rc $(rc) [$(cat err.txt)]"
    grep -q "^q/k norm $v: perplexity on 104 tokens, held out" out.txt || fail "gains $v: tagged perplexity [$(cat out.txt)]"
    grep -q "^q/k norm $v: relative Frobenius errors" out.txt || fail "gains $v: tagged errors line [$(cat out.txt)]"
    eval "g_$v=$(dnll)"
    cp out.txt g_$v.out
done
# the norm's own share: the plain layer alone against the source, one score / output pair per layer
alone() { grep "^q/k norm $1: the plain layer alone (the norm's approximation, before TransMLA)" g_$1.out |
          grep -o '[0-9]: [0-9.e-]* / ' | awk '{ s += $2; n++ } END { if (n == 5) print s; else print "none" }'; }
lt "$(alone fold)" "$(serr g_fold.csv)" || fail "fold alone $(alone fold) not below the whole conversion's $(serr g_fold.csv)"
lt "$(alone fold)" "$(alone drop)" || fail "fold alone $(alone fold) not below drop alone $(alone drop)"
grep -q "^q/k norm drop: the norm removed" out.txt || fail "drop: described [$(cat out.txt)]"
# the other balance setting measured against the source too: columns 7-9 filled on every layer
awk -F, 'NR > 1 && ($7 == "" || $8 == "" || $9 == "") { bad = 1 } END { exit bad }' g_fold.csv ||
    fail "the other balance's columns empty [$(cat g_fold.csv)]"
lt "$g_fold" 0.15 || fail "gains: fold moves the held-out NLL by $g_fold (want < 0.15)"
lt 1.0 "$g_drop" || fail "gains: drop moves the held-out NLL by only $g_drop (want > 1)"
lt "$(serr g_fold.csv)" "$(serr g_drop.csv)" || fail "gains: score errors fold $(serr g_fold.csv) >= drop $(serr g_drop.csv)"

# ---- unit gains: fold is the norm's scale alone, within 0.02 of the source's NLL; drop is not
for v in fold drop; do
    run -e "load $T/q3u; convert mla kv-rank full qk-norm $v calib $story seqlen 64 to u_$v.csv"
    eval "u_$v=$(dnll)"
done
lt "$u_fold" 0.02 || fail "unit: fold moves the held-out NLL by $u_fold (want < 0.02)"
lt 1.0 "$u_drop" || fail "unit: drop moves the held-out NLL by only $u_drop"

# ---- the fold's export: DeepSeek-V3, checked against the source with its norm
run -e "load $T/q3g; convert mla kv-rank full qk-norm fold calib $story seqlen 64; export $T/q3g-mla; check $T/q3g-mla"
[ "$(rc)" = 0 ] || fail "export + check DIR: rc $(rc) [$(cat err.txt)]"
grep -q "the conversion's report on the same inputs: out_err within [0-9.e-]* of it in all 5 layers" out.txt ||
    fail "check DIR: the report's errors [$(cat out.txt)]"
grep -Eq '"model_type":[[:space:]]*"deepseek_v3"' "$T/q3g-mla/config.json" || fail "export: not DeepSeek-V3"
grep -Eq '"qk_norm":[[:space:]]*"q/k norm fold: gains folded into W_Q / W_K' "$T/q3g-mla/attnlab_manifest.json" ||
    fail "export: the manifest does not say the norm was folded"

# ---- the synthetic checkpoints: olmo2 (norm over the projection) and qwen3 (per head)
run -e "synth family olmo2 $T/ol; synth family qwen3 $T/qw"
for m in ol qw; do
    for v in fold drop; do
        run -e "load $T/$m; convert mla kv-rank full qk-norm $v ids ids.txt samples 4 seqlen 64 to ${m}_$v.csv"
        [ "$(rc)" = 0 ] || fail "$m $v: rc $(rc) [$(cat err.txt)]"
        eval "${m}_$v=$(dnll)"
    done
    lt "$(serr ${m}_fold.csv)" "$(serr ${m}_drop.csv)" || fail "$m: score errors fold $(serr ${m}_fold.csv) >= drop $(serr ${m}_drop.csv)"
done
lt "$ol_fold" "$ol_drop" || fail "olmo2: fold moves the held-out NLL by $ol_fold, drop by $ol_drop"
echo "held-out |dNLL| fold / drop: gains $g_fold / $g_drop, unit $u_fold / $u_drop, olmo2 $ol_fold / $ol_drop, qwen3 $qw_fold / $qw_drop"
echo "the norm alone, summed score_err fold / drop: gains $(alone fold) / $(alone drop)"
echo "summed score_err fold / drop: gains $(serr g_fold.csv) / $(serr g_drop.csv), olmo2 $(serr ol_fold.csv) / $(serr ol_drop.csv), qwen3 $(serr qw_fold.csv) / $(serr qw_drop.csv)"
cli_done
