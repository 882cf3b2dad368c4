#!/usr/bin/env bash
# cli_export_attnlab.sh -- issue 30 section 2: `export DIR format attnlab` writes a `convert mla` that
# DeepSeek-V3's stock layout cannot hold in attnlab's own layout (model_type attnlab_mla), which `load DIR`
# runs as the session did. On the synthetic checkpoints of
#   gemma2  (windows of 8 on layers 0 and 2, soft-caps, sandwich norms, embedding scale),
#   gpt_oss (windows, a sink logit per head, YaRN, q/k/v/o biases, fused experts),
# at full kv rank and at a cut: the reload's perplexity equals the session's to 1e-6; `check DIR` reproduces the
# conversion's report (out_err within 1e-5 of it in every layer, no engine columns); `lint DIR` says every
# engine refuses attnlab_mla and would compute a different model as DeepSeek-V3, naming what it lacks; the stock
# export's refusal names `format attnlab`. smollm3 (NoPE layer), olmo2 (qk-norm fold, post-norms), phi3 (fused
# projections) and mixtral reload the same at kv-rank 48. qk-norm keep on qwen3 / olmo2 (see its block).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-export-attnlab shared-cache
cd "$T" || exit 1

seq 1 40 | awk '{printf "%d ", ($1*37)%250+1}' >x40.ids

for f in gemma2 gpt_oss; do
    "$B" -e "synth family $f $T/$f" >/dev/null 2>&1 || { fail "synth family $f"; continue; }
    p0=$(ppl_of "load $T/$f; ppl ids x40.ids")
    for rank in full 48; do
        d=$T/$f-$rank
        conv="load $T/$f; convert mla kv-rank $rank ppl off"
        ps=$(ppl_of "$conv; ppl ids x40.ids; export $d format attnlab")
        case $ps in ERR:*) fail "$f rank $rank: convert + export format attnlab: $ps"; continue ;; esac
        ok "$f rank $rank: the folder is attnlab_mla of $f" grep -q "\"attnlab_source_model_type\":[[:space:]]*\"$f\"" "$d/config.json"
        ok "  model_type attnlab_mla" grep -q '"model_type":[[:space:]]*"attnlab_mla"' "$d/config.json"
        pl=$(ppl_of "load $d; ppl ids x40.ids")
        case $pl in ERR:*) fail "$f rank $rank: load + ppl of the export: $pl" ;;
            *) near "$pl" "$ps" 1e-6 || fail "$f rank $rank: the reload's ppl $pl, the session's $ps" ;; esac
        # not equal by accident: the conversion changed the model
        near "$ps" "$p0" 1e-4 && fail "$f rank $rank: the conversion keeps the source's ppl $p0: the test cannot tell"
        run -e "check $d"
        ok "$f rank $rank: check DIR runs" test "$(rc)" = 0
        w=$(grep -o "out_err within [0-9.e+-]* of it in all 4 layers" out.txt | awk '{print $3}')
        [ -n "$w" ] && awk -v w="$w" 'BEGIN { exit !(w < 1e-5) }' ||
            fail "$f rank $rank: check DIR does not reproduce the report (within '$w') [$(cat out.txt err.txt)]"
        ok "  as attnlab reads it, no engine columns" grep -q "evaluated as attnlab reads it (its own layout" out.txt
        run -e "lint $d"
        for t in transformers vLLM SGLang llama.cpp; do
            grep -q "^$t .*will not load" out.txt || fail "$f rank $rank: lint's $t verdict [$(grep "^$t" out.txt)]"
        done
        ok "  lint: read as DeepSeek-V3 it computes a different model" \
            grep -q "read as DeepSeek-V3 (deepseek_v3) it computes a different model" out.txt
        cp out.txt "$f-lint.txt"
    done
    run -e "load $T/$f; convert mla kv-rank full ppl off; export $T/$f-stock"
    ok "$f: the stock export is refused" test "$(rc)" = 1
    ok "  naming format attnlab" grep -q "export DIR format attnlab. saves it in attnlab's own layout" err.txt
done
ok "gemma2's lint names the window and the soft-cap" grep -q "lacks what the source keeps (sliding window.*attention soft-cap" gemma2-lint.txt
ok "gpt_oss's lint names the sinks" grep -q "lacks what the source keeps (sliding window, attention sinks" gpt_oss-lint.txt
# the other families whose stock export refuses (smollm3's NoPE layer, olmo2's post-norms with qk-norm fold, phi3's fused
# projections and MLP) or holds them (mixtral's experts) reload the same at kv-rank 48: ppl to 1e-6, check within 1e-5
for fq in "smollm3:" "olmo2:qk-norm fold" "phi3:" "mixtral:"; do
    f=${fq%%:*}
    "$B" -e "synth family $f $T/$f" >/dev/null 2>&1 || { fail "synth family $f"; continue; }
    ps=$(ppl_of "load $T/$f; convert mla kv-rank 48 ${fq#*:} ppl off; ppl ids x40.ids; export $T/$f-48 format attnlab")
    pl=$(ppl_of "load $T/$f-48; ppl ids x40.ids")
    case "$ps$pl" in *ERR:*) fail "$f: $ps / $pl" ;;
        *) near "$pl" "$ps" 1e-6 || fail "$f: the reload's ppl $pl, the session's $ps" ;; esac
    run -e "check $T/$f-48"
    w=$(grep -o "out_err within [0-9.e+-]* of it" out.txt | awk '{print $3}')
    [ -n "$w" ] && awk -v w="$w" 'BEGIN { exit !(w < 1e-5) }' || fail "$f: check DIR within '$w' of the report [$(cat err.txt)]"
done
# a quantized source (compressed-tensors FP8 per channel): its quantization_config kept, the new attention modules
# (written in f32) added to its ignore list, the copied FP8 tensors read as before: the reload's ppl is the session's
python3 "$ATTNLAB_SRC/tests/fp8ct_quant.py" "$T/gemma2" "$T/g2ct" channel >/dev/null || fail "fp8ct_quant gemma2"
ps=$(ppl_of "load $T/g2ct; convert mla kv-rank 48 ppl off; ppl ids x40.ids; export $T/g2ct-48 format attnlab")
pl=$(ppl_of "load $T/g2ct-48; ppl ids x40.ids")
case "$ps$pl" in *ERR:*) fail "g2ct: $ps / $pl" ;; *) near "$pl" "$ps" 1e-6 || fail "g2ct: reload $pl, session $ps" ;; esac
python3 - "$T/g2ct-48/config.json" <<'PY' || fail "g2ct: the new attention modules are not in quantization_config's ignore"
import json, sys
q = json.load(open(sys.argv[1]))["quantization_config"]
sys.exit(0 if "model.layers.3.self_attn.kv_a_proj_with_mqa" in q.get("ignore", []) else 1)
PY
# the reloaded folder keeps the windows (info), and a format other than attnlab is refused for convert mla
run -e "load $T/gemma2-48; info"
ok "gemma2's reload has its window" grep -q "layers 0, 2 sliding 8" out.txt
run -e "load $T/gemma2-48; export $T/g2.gguf"
ok "its GGUF is refused, naming the layout" grep -q "cannot be written as GGUF: attnlab's own layout (attnlab_mla" err.txt
run -e "load $T/gemma2; convert mla kv-rank 48 ppl off; export $T/g2-dense format dense"
ok "format dense is refused for convert mla" grep -q "format dense is not taken by a TransMLA export" err.txt
# qk-norm keep (issue 30 section 1): the norm kept on keys rebuilt from the fold conversion's cache. At full kv rank it
# is exact (ppl = the source's to 1e-6, every layer's report and check errors < 1e-5); at a cut its worst per-layer
# score error is below fold's and drop's on qwen3 and olmo2 (same cache: r + D values per token); no stock export holds it
# (`format attnlab` does: tests/cli_export_attnlab2.sh).
# worst_err COL: the largest value in column COL of the report's layer table
worst_err() { awk -v c="$1" '/^layer/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { if ($c + 0 > m) m = $c + 0 } END { printf "%g", m + 0 }' out.txt; }
for f in qwen3 olmo2; do
    [ -d "$T/$f" ] || "$B" -e "synth family $f $T/$f" >/dev/null 2>&1 || { fail "synth family $f"; continue; }
    p0=$(ppl_of "load $T/$f; ppl ids x40.ids")
    pk=$(ppl_of "load $T/$f; convert mla kv-rank full qk-norm keep ppl off; ppl ids x40.ids")
    case $pk in ERR:*) fail "$f: qk-norm keep: $pk" ;;
        *) near "$pk" "$p0" 1e-6 || fail "$f: qk-norm keep at full rank changes ppl $p0 -> $pk" ;; esac
    pf=$(ppl_of "load $T/$f; convert mla kv-rank full qk-norm fold ppl off; ppl ids x40.ids")
    near "$pf" "$p0" 1e-4 && fail "$f: fold at full rank keeps ppl $p0 too: the test cannot tell"
    run -e "load $T/$f; convert mla kv-rank full qk-norm keep ppl off; check"
    ok "$f: keep + check run" test "$(rc)" = 0
    e=$(sed -n '/conversion against /,$p' out.txt |
        awk '/^layer/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { if ($3 + 0 > m) m = $3 + 0; n++ } END { printf "%g", n == 3 ? m + 0 : 1 }')
    awk -v e="$e" 'BEGIN { exit !(e < 1e-5) }' || fail "$f: keep at full rank: check's out_err $e [$(cat out.txt)]"
    declare -A se
    for m in drop fold keep; do
        run -e "load $T/$f; convert mla kv-rank 24 qk-norm $m ppl off"
        se[$m]=$(worst_err 5)
    done
    awk -v k="${se[keep]}" -v f="${se[fold]}" -v d="${se[drop]}" 'BEGIN { exit !(k < f && k < d && k > 0) }' ||
        fail "$f: at kv-rank 24 keep's worst score_err ${se[keep]} is not below fold's ${se[fold]} and drop's ${se[drop]}"
    run -e "load $T/$f; convert mla kv-rank 24 qk-norm keep ppl off; export $T/$f-keep"
    ok "$f: keep's stock export is refused, naming keep" grep -q "export: qk-norm keep normalises" err.txt
done
# qk-norm keep on a real small model with norms: stories260K as Qwen3 with trained-looking per-head gains
# (tests/qwen3_norms.py): at full rank the held-out perplexity stays the source's (log to 1e-5); at kv-rank 32 keep's
# held-out log-perplexity moves less than fold's (0.065 against 0.155) and its summed score error is below fold's
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
python3 "$ATTNLAB_SRC/tests/qwen3_norms.py" "$ATTNLAB_MODELS/stories260K-hf" "$T/q3g" gains >/dev/null || fail "qwen3_norms gains"
story=$ATTNLAB_SRC/examples/tinystory.txt
dnll() { sed -n 's/.*perplexity on .*(.*; log \([0-9.]*\) -> \([0-9.]*\)).*/\1 \2/p' out.txt | head -1 |
         awk '{ d = $2 - $1; print (d < 0 ? -d : d) }'; }
run -e "load $T/q3g; convert mla kv-rank full qk-norm keep calib $story seqlen 64"
d=$(dnll)
[ -n "$d" ] && awk -v d="$d" 'BEGIN { exit !(d < 1e-5) }' || fail "q3g keep full: held-out log-ppl moves $d [$(cat out.txt err.txt)]"
declare -A dn ss
for m in fold keep; do
    run -e "load $T/q3g; convert mla kv-rank 32 qk-norm $m calib $story seqlen 64"
    dn[$m]=$(dnll)
    ss[$m]=$(awk '/^layer/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { s += $5 } END { print s + 0 }' out.txt)
done
awk -v k="${dn[keep]}" -v f="${dn[fold]}" 'BEGIN { exit !(k < f && k > 0) }' ||
    fail "q3g kv-rank 32: keep's held-out log-ppl change ${dn[keep]} not below fold's ${dn[fold]}"
awk -v k="${ss[keep]}" -v f="${ss[fold]}" 'BEGIN { exit !(k < f) }' ||
    fail "q3g kv-rank 32: keep's summed score error ${ss[keep]} not below fold's ${ss[fold]}"
cli_done
