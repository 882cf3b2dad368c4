#!/usr/bin/env bash
# cli_measure.sh -- a transformation is measured in the session that made it (issue 25, item 1):
# `ppl`, `generate` and `check` run the current model's newest transformation (the `truncate`
# working copy, `convert mla`, `convert tpa`) with its layers swapped into the forward pass, and
# their first line names the model and the transformation; `source` measures the loaded model.
# The in-session numbers are those of the exported and reloaded model (dense FaRR export), and of
# the conversions' own perplexity reports; KQ-SVD projections say they do not run.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K/stories260K.bin
cli_setup /tmp/attnlab-cli-measure shared-cache
cd "$T" || exit 1
HF="$M/stories260K-hf"
BIN="$M/stories260K/stories260K.bin"
G2="$M/gpt2-tiny-random"
TXT="${ATTNLAB_SRC:-$(dirname "$0")/..}/examples/tinystory.txt"
[ -f "$TXT" ] || { echo "FAIL: no $TXT"; exit 1; }

# col FILE: the nll (column 2) of a `ppl ... to FILE.csv` row
nll() { tail -1 "$1" | cut -d, -f2; }
# close A B TOL: |A - B| <= TOL
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'; }

# 1. the issue's repro: ppl after `truncate vo rank 4` is the truncated model's, equal (float
#    rounding) to the reloaded dense export's; `source` keeps the loaded model's 3.7555.
run -e "load $HF as s; ppl $TXT to p0.csv; truncate vo rank 4; ppl $TXT to p1.csv;
export ex format dense; load ex as e; ppl $TXT to p3.csv"
[ "$(rc)" = 0 ] || fail "truncate + ppl: rc $(rc): $(cat err.txt)"
close "$(nll p0.csv)" 1.32322 1e-4 || fail "source ppl: [$(cat p0.csv)]"
close "$(nll p1.csv)" "$(nll p3.csv)" 1e-5 || fail "in-session ppl [$(cat p1.csv)] is not the export's [$(cat p3.csv)]"
awk -F, 'END { exit !(exp($2) > 9 && exp($2) < 11) }' p1.csv || fail "truncated ppl not about 9.77: [$(cat p1.csv)]"
grep -q "^ppl of s with truncate vo rank 4 (FaRR working copy; .*5 of 5 layers run as transformed" out.txt ||
    fail "ppl headline: [$(cat out.txt)]"
run -e "load $HF as s; truncate vo rank 4; ppl $TXT source to p2.csv"
close "$(nll p2.csv)" "$(nll p0.csv)" 0 || fail "ppl source is not the loaded model's: [$(cat p2.csv)] vs [$(cat p0.csv)]"
grep -q "^ppl of s (the loaded model, as asked with .source.)" out.txt || fail "ppl source headline: [$(cat out.txt)]"

# 2. VO + QK with biases (GPT-2: Conv1D, c_attn bias, output bias): the working copy holds both
#    truncations, the headline says both, and the in-session nll is the export's.
run -e "load $G2 as g; ppl $TXT max-tokens 300 to g0.csv; truncate vo rank 3; truncate qk rank 2;
ppl $TXT max-tokens 300 to g1.csv; export gx format dense; load gx; ppl $TXT max-tokens 300 to g2.csv"
[ "$(rc)" = 0 ] || fail "gpt2 vo+qk: rc $(rc): $(cat err.txt)"
close "$(nll g1.csv)" "$(nll g2.csv)" 2e-6 || fail "gpt2 in-session [$(cat g1.csv)] vs export [$(cat g2.csv)]"
close "$(nll g0.csv)" "$(nll g2.csv)" 2e-6 && fail "gpt2: the export's nll equals the source's, the test cannot tell"
grep -q "^ppl of g with truncate vo rank 3; truncate qk rank 2 (FaRR working copy" out.txt ||
    fail "gpt2 headline: [$(cat out.txt)]"

# 2b. MLA (demo-r1-f32: kv_b_proj's K and V rows, q_b_proj): VO + QK in the session = the export.
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", 1 + s % 255 } }' >r.ids
run -e "load demo-r1-f32 as r; truncate vo tau 0.999 policy layer-max; truncate qk rank 8; ppl ids r.ids seqlen 64 to r1.csv;
ppl ids r.ids seqlen 64 source to r0.csv; export rx format dense; load rx; ppl ids r.ids seqlen 64 to r2.csv"
[ "$(rc)" = 0 ] || fail "demo-r1-f32 vo+qk: rc $(rc): $(cat err.txt)"
close "$(nll r1.csv)" "$(nll r2.csv)" 2e-6 || fail "MLA in-session [$(cat r1.csv)] vs export [$(cat r2.csv)]"
close "$(nll r0.csv)" "$(nll r2.csv)" 2e-6 && fail "MLA: the export's nll equals the source's, the test cannot tell"

# 2c. every family's layout (fused qkv_proj, query_key_value, Conv1D, sandwich norms, Q/K norms,
#     MoE, partial rotary): the working copy in the session = its reloaded dense export; QK where
#     the family has NoPE dims to fuse.
awk 'BEGIN { s = 3; for (i = 0; i < 120; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", 1 + s % 99 } }' >f.ids
for f in qwen3 qwen3_moe gemma2 gemma3_text mixtral phi3 gpt_neox olmo2 olmo3 deepseek_v3; do
    qk=""
    case $f in phi3 | gpt_neox | deepseek_v3) qk="truncate qk rank 2;" ;; esac
    run -e "synth family $f m-$f; load m-$f as a; truncate vo rank 2; $qk ppl ids f.ids seqlen 32 to f1.csv;
ppl ids f.ids seqlen 32 source to f0.csv; export x-$f format dense; load x-$f; ppl ids f.ids seqlen 32 to f2.csv"
    [ "$(rc)" = 0 ] || { fail "$f: rc $(rc): $(cat err.txt)"; continue; }
    close "$(nll f1.csv)" "$(nll f2.csv)" 2e-6 || fail "$f ${qk:+(vo + qk)}: in-session [$(cat f1.csv)] vs export [$(cat f2.csv)]"
    close "$(nll f0.csv)" "$(nll f2.csv)" 2e-6 && fail "$f: the export's nll equals the source's, the test cannot tell"
done

# 3. a llama2.c checkpoint (no export possible) runs its working copy too: the same numbers as the
#    HF form's export.
run -e "load $BIN as b; truncate vo rank 4; ppl $TXT to b1.csv"
[ "$(rc)" = 0 ] || fail "llama2.c truncate + ppl: rc $(rc): $(cat err.txt)"
close "$(nll b1.csv)" "$(nll p3.csv)" 1e-5 || fail "llama2.c in-session [$(cat b1.csv)] vs HF export [$(cat p3.csv)]"

# 4. generate: the working copy's greedy text is the export's; `source` is the loaded model's.
run -e "load $HF as s; truncate vo rank 4; generate \"\" tokens 24"
[ "$(rc)" = 0 ] || fail "generate: rc $(rc): $(cat err.txt)"
grep -q "^generate of s with truncate vo rank 4 (FaRR working copy" err.txt || fail "generate headline: [$(cat err.txt)]"
grep "^Once upon" out.txt >gen_trunc.txt
run -e "load $HF as s; truncate vo rank 4; generate \"\" tokens 24 source"
grep -q "^generate of s (the loaded model, as asked" err.txt || fail "generate source headline: [$(cat err.txt)]"
grep "^Once upon" out.txt >gen_src.txt
grep -qF "Once upon a time, there was a little girl named Lily" gen_src.txt || fail "source text: [$(cat out.txt)]"
run -e "load ex; generate \"\" tokens 24"
cmp -s <(grep "^Once upon" out.txt) gen_trunc.txt || fail "in-session text [$(cat gen_trunc.txt)] is not the export's [$(cat out.txt)]"
cmp -s gen_trunc.txt gen_src.txt && fail "the truncated text equals the source's: [$(cat gen_src.txt)]"

# 5. check with no folder on a truncation: per-layer score_err / out_err, no perplexity on random
#    tokens; with a calibration text, perplexity before / after on its held-out windows.
run -e "load $HF as s; truncate vo rank 4; check to c1.csv; calibrate $TXT seqlen 64; check"
[ "$(rc)" = 0 ] || fail "check of a truncation: rc $(rc): $(cat err.txt)"
[ "$(head -1 c1.csv)" = "layer,score_err,out_err,compare_out_err" ] || fail "check columns: [$(head -1 c1.csv)]"
[ "$(tail -n +2 c1.csv | wc -l)" = 5 ] || fail "check rows: [$(cat c1.csv)]"
awk -F, 'NR > 1 && !($2 == 0 && $3 > 0.3 && $3 < 0.9) { bad = 1 } END { exit bad }' c1.csv ||
    fail "VO truncation errors (scores exact, outputs 0.3-0.9): [$(cat c1.csv)]"
grep -q "^check of s with truncate vo rank 4 (FaRR working copy)" out.txt || fail "check headline: [$(cat out.txt)]"
grep -q "perplexity: not measured (no text: give text FILE, or calibrate s on a text first)" out.txt || fail "check without text: [$(cat out.txt)]"
grep -qi "random tokens: perplexity" out.txt && fail "perplexity on random tokens: [$(cat out.txt)]"
grep -q "perplexity on 104 tokens, held out (the validation split of .*tinystory.txt, tokens 1024-1129), windows of 64: 3.91245 before (source), 10\.[0-9]* after (the working copy, in the session)" out.txt ||
    fail "check perplexity before/after: [$(cat out.txt)]"

# 6. convert tpa reports perplexity before / after on the held-out windows, and `ppl` of the same
#    tokens afterwards runs the conversion: the same number. The same for convert mla (its own
#    report runs an export; ppl swaps the layers in).
run -e "load $HF as s; tokenize file $TXT to all.ids"
tr ' ' '\n' <all.ids | sed -n '1025,1130p' | tr '\n' ' ' >valid.ids
[ "$(wc -w <valid.ids)" = 106 ] || fail "validation ids: $(wc -w <valid.ids)"
run -e "load $HF as s; calibrate $TXT seqlen 64; convert tpa kv-rank 2; ppl ids valid.ids seqlen 64 to t1.csv;
convert mla kv-rank 8; ppl ids valid.ids seqlen 64 to m1.csv"
[ "$(rc)" = 0 ] || fail "convert + ppl: rc $(rc): $(cat err.txt)"
tpa_after=$(sed -n 's/^perplexity on 104 tokens, held out .*: 3.91245 before (source), \([0-9.]*\) after (the converted layers swapped in memory.*/\1/p' out.txt)
[ -n "$tpa_after" ] || fail "convert tpa perplexity line: [$(cat out.txt)]"
awk -F, -v p="$tpa_after" 'END { d = exp($2) / p - 1; exit !(d < 1e-5 && d > -1e-5) }' t1.csv ||
    fail "ppl after convert tpa [$(cat t1.csv)] is not its report's $tpa_after"
mla_after=$(sed -n 's/^perplexity on 104 tokens, held out .*: 3.91245 before, \([0-9.]*\) after .*/\1/p' out.txt)
[ -n "$mla_after" ] || fail "convert mla perplexity line: [$(cat out.txt)]"
awk -F, -v p="$mla_after" 'END { d = exp($2) / p - 1; exit !(d < 1e-5 && d > -1e-5) }' m1.csv ||
    fail "ppl after convert mla [$(cat m1.csv)] is not its report's $mla_after"
grep -q "^ppl of s with convert tpa kv-rank 2 (the TPA layers swapped in" out.txt || fail "tpa headline: [$(cat out.txt)]"
grep -q "^ppl of s with convert mla kv-rank 8 (the converted MLA layers swapped in" out.txt || fail "mla headline: [$(cat out.txt)]"

run -e "load $HF as s; convert tpa kv-rank 2; calibrate $TXT seqlen 64; convert tpa kv-rank 2 ppl off"
[ "$(rc)" = 0 ] || fail "convert tpa ppl off: rc $(rc): $(cat err.txt)"
grep -q "^perplexity: none (the session has no calibration text of s" out.txt || fail "tpa without text: [$(cat out.txt)]"
[ "$(grep -c "^perplexity" out.txt)" = 1 ] || fail "convert tpa ppl off still measured: [$(cat out.txt)]"

# 7. KQ-SVD projections define no runnable attention: said, and the loaded model is measured.
run -e "load $HF as s; calibrate $TXT seqlen 64; kvsvd learn kqsvd rank 4; ppl $TXT to k1.csv"
[ "$(rc)" = 0 ] || fail "kvsvd + ppl: rc $(rc): $(cat err.txt)"
grep -q "^ppl of s (the loaded model)" out.txt && grep -q "^newer, not run here: kvsvd learn kqsvd rank 4 (" out.txt ||
    fail "kvsvd headline: [$(cat out.txt)]"
close "$(nll k1.csv)" "$(nll p0.csv)" 0 || fail "kvsvd: not the loaded model's ppl: [$(cat k1.csv)]"

# 8. One rule for ppl and check (found in review: ppl measured the source behind a newer kvsvd learn
# while check went back to the truncation): both measure the newest transformation they can -- the
# truncation -- and both name the newer kvsvd learn they passed over.
run -e "load $HF as s; calibrate $TXT seqlen 64; truncate vo rank 4; kvsvd learn kqsvd rank 4; ppl ids valid.ids seqlen 64 to k2.csv; check"
[ "$(rc)" = 0 ] || fail "truncate + kvsvd + ppl + check: rc $(rc): $(cat err.txt)"
grep -q "^ppl of s with truncate vo rank 4 (FaRR working copy" out.txt && grep -q "^check of s with truncate vo rank 4 (FaRR working copy)" out.txt ||
    fail "ppl and check measure different transformations: [$(grep -E '^(ppl|check) of' out.txt)]"
[ "$(grep -c "^newer, not \(run\|checkable\) here: kvsvd learn kqsvd rank 4" out.txt)" = 2 ] || fail "the passed-over kvsvd learn is not named twice: [$(cat out.txt)]"
chk_after=$(sed -n 's/^perplexity on 104 tokens, held out .*: 3.91245 before (source), \([0-9.]*\) after (the working copy.*/\1/p' out.txt)
awk -F, -v p="$chk_after" 'END { d = exp($2) / p - 1; exit !(p > 0 && d < 1e-5 && d > -1e-5) }' k2.csv ||
    fail "ppl [$(cat k2.csv)] is not check's after [$chk_after]"

# 9. The headline names what stands: a later `truncate vo` replaced the earlier one's plan (found in
# review: "with truncate vo rank 6; truncate vo rank 4 layers 0-1").
run -e "load $HF as s; truncate vo rank 6; truncate vo rank 4 layers 0-1; ppl $TXT"
grep -q "^ppl of s with truncate vo rank 4 layers 0-1 (FaRR working copy; .*: 2 of 5 layers run as transformed" out.txt ||
    fail "the replaced truncate is still named: [$(grep '^ppl of' out.txt)]"

# 10. A perplexity that cannot be measured (an empty text) is a line; the check's table stands.
: >empty.txt
run -e "load $HF as s; truncate vo rank 4; check text empty.txt to ce.csv"
[ "$(rc)" = 0 ] && grep -q "^perplexity: not measured (" out.txt && [ "$(tail -n +2 ce.csv | wc -l)" = 5 ] ||
    fail "check with an empty text lost its table: rc $(rc) [$(cat out.txt err.txt)]"

# 11. Exports of a model loaded by a relative path are checked from another folder: the manifests
# record the source's absolute path (FaRR, TPA and KQ-SVD recorded it as typed).
rm -rf relsrc rt rf elsewhere && cp -r "$HF" relsrc && mkdir elsewhere
run -e "load relsrc; convert tpa kv-rank 2; export rt; truncate vo rank 4; export rf format dense"
[ "$(rc)" = 0 ] || fail "relative exports: rc $(rc): $(cat err.txt)"
(cd elsewhere && "$B" -e "check ../rt; check ../rf" </dev/null >../out.txt 2>../err.txt) || fail "check from another folder: $(cat err.txt)"
grep -q "^../rt (form a, R_K 2, R_V 2) against /.*/relsrc" out.txt && grep -q "^PASS: the export's fused maps" out.txt ||
    fail "sources not found from another folder: [$(cat out.txt err.txt)]"

# 12. One perplexity for one TransMLA conversion: `convert mla` (its export), `check` (the export as
# stock engines run it), `convert mla-table` and `ppl` (the layers in the session) all run the
# model at the export's rms_norm_eps (found in review: 10.6192 beside mla-table's 10.6196).
tr ' ' '\n' <all.ids | sed -n '769,1130p' | tr '\n' ' ' >valid256.ids
run -e "load $HF as s; calibrate $TXT; convert mla kv-rank 16; check; convert mla-table kv-ranks 16 to mt.csv; ppl ids valid256.ids seqlen 256 to mp.csv"
[ "$(rc)" = 0 ] || fail "convert mla + table + ppl: rc $(rc): $(cat err.txt)"
conv=$(sed -n 's/^perplexity on 360 tokens, held out .*: 3.87574 before, \([0-9.]*\) after .*its DeepSeek-V3 export.*/\1/p' out.txt)
chk=$(sed -n 's/^perplexity on 360 tokens, held out .*: 3.87574 before (source), \([0-9.]*\) after (the export.*/\1/p' out.txt)
tab=$(awk -F, '$1 == 16 && $2 == "WX" && $3 == "on" { print $NF }' mt.csv)
ppl=$(awk -F, 'END { printf "%.6g", exp($2) }' mp.csv)
[ -n "$conv" ] && [ "$conv" = "$chk" ] && [ "$conv" = "$(printf %.6g "$tab")" ] && [ "$conv" = "$ppl" ] ||
    fail "one conversion, several perplexities: convert mla $conv, check $chk, mla-table $tab, ppl $ppl"

cli_done
