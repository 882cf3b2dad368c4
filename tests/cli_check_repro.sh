#!/usr/bin/env bash
# cli_check_repro.sh -- `check` reproduces the conversion it checks (issue 25, section 4): after a
# calibrated `convert mla` / `convert tpa` on stories260K-hf, `check` in the session and `check DIR`
# on the export in a fresh process (no calibration there: the statistics come from the folder's
# check_inputs.safetensors) print the conversion's own per-layer errors (same seed, seed rule and
# statistics); a non-default seed is recorded too; statistics that are not at hand are said in one
# line; perplexity only on a text (the calibration text's held-out split, as `convert mla` measures
# it, or `text FILE`), never on random token ids; a KQ-SVD export folder is recognised and gives
# `kvsvd eval`'s numbers; an unknown folder is refused with the list of the export manifests
# attnlab reads.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-check-repro
cd "$T" || exit 1
M=${ATTNLAB_MODELS:-$ATTNLAB_SRC/tests/models}/stories260K-hf
TXT=$ATTNLAB_SRC/examples/tinystory.txt

# same_col A.csv COLA B.csv COLB [DIGITS]: every row's value equal to DIGITS (default 6, the printed
# precision) significant digits. A TransMLA check DIR measures the export (float32 weights, latent
# norms built to 2^-24): about 2e-7 from the report, so those columns compare to 5 digits and the
# check's own line says how far they are.
same_col() {
    paste -d, <(tail -n +2 "$1" | cut -d, -f"$2") <(tail -n +2 "$3" | cut -d, -f"$4") |
        awk -F, -v d="${5:-6}" 'NF != 2 { bad = 1 } { f = "%." d "g"; if (sprintf(f, $1) != sprintf(f, $2)) { print "row " NR ": " $1 " vs " $2; bad = 1 } }
                 END { exit bad || NR == 0 }'
}
# within FILE: the check's line comparing with the report says a difference below 1e-5
within() { grep -Eq "report on the same inputs: out_err within [0-9.e-]+ of it in all 5 layers" "$1" &&
           awk '/report on the same inputs/ { exit !($10 < 1e-5) }' "$1"; }

# ---- TransMLA, calibrated: convert's table, check, export, check DIR in a fresh process
run -e "load $M as s; calibrate $TXT; convert mla kv-rank 16 to conv.csv; check to chk.csv; export mla"
[ "$(rc)" = 0 ] || fail "convert mla / check / export: rc $(rc) [$(cat err.txt)]"
cp out.txt mla_session.txt
ok "mla: check in the session = convert's out_err" same_col conv.csv 6 chk.csv 3 5
ok "mla: check in the session = convert's score_err" same_col conv.csv 5 chk.csv 2 5
ok "mla: check in the session says how close to the report" within mla_session.txt
ok "mla: the export keeps the statistics" test -s mla/check_inputs.safetensors
ok "mla: the export says what it recorded" grep -q "check inputs recorded: 64 tokens, seed 20250601, the calibration's statistics" out.txt
run -e "check mla to dir.csv"
[ "$(rc)" = 0 ] || fail "check DIR: rc $(rc) [$(cat err.txt)]"
ok "mla: check DIR (fresh process) = convert's out_err" same_col conv.csv 6 dir.csv 3 5
ok "mla: check DIR = convert's score_err" same_col conv.csv 5 dir.csv 2 5
ok "mla: check DIR says how close to the report" within out.txt
ok "mla: check DIR names its inputs" grep -q "seed 20250601, with the mean and second moment of the conversion's calibration (768 tokens of .*tinystory.txt; digest [0-9a-f]*, from the export folder)" out.txt
ok "mla: no perplexity on random tokens" hasnt "$(cat out.txt mla_session.txt)" "random tokens:"
ok "mla: no text in a fresh process: said" grep -q "^perplexity: not measured (no text: give text FILE" out.txt
# the perplexity of check in the session: the same held-out tokens and numbers as convert mla's
conv_ppl=$(grep -o "perplexity on 360 tokens, held out (the validation split of [^)]*), windows of 256: [0-9.]* before, [0-9.]* after" mla_session.txt | sed 's/ before, / /; s/ after$//' | awk '{print $(NF-1), $NF}')
chk_ppl=$(grep -o "windows of 256: [0-9.]* before (source), [0-9.]* after (the export" mla_session.txt | awk '{print $4, $7}')
ok "mla: check's perplexity is convert's ($conv_ppl / $chk_ppl)" test -n "$conv_ppl" -a "$conv_ppl" = "$chk_ppl"
# `text FILE`: perplexity before/after on the given text
run -e "check mla text $TXT"
ok "mla: check DIR text FILE gives perplexity" grep -Eq "^perplexity on [0-9]+ tokens, .*tinystory.txt \(given: [0-9]+ tokens\), windows of [0-9]+: [0-9.]+ before \(source\), [0-9.]+ after" out.txt

# the statistics not at hand: one line, unit variance, and the errors are not the report's
cp -r mla mla2 && rm mla2/check_inputs.safetensors
sed -i 's/"file":\t"check_inputs.safetensors"/"file":\tnull/' mla2/attnlab_manifest.json
run -e "check mla2 to nost.csv"
ok "mla: statistics not at hand: said" grep -q "unit variance: the conversion drew with its calibration's statistics (768 tokens of .*tinystory.txt; digest [0-9a-f]*), which are not at hand (the session has no calibration of the source with attention inputs), so these errors are not its report's" out.txt
if same_col conv.csv 6 nost.csv 3 2 >/dev/null; then fail "mla: unit-variance errors equal the calibrated ones"; else pass=$((pass + 1)); fi
# ... and in a session that has the same calibration (its digest matches): the report again
run -e "load $M as s; calibrate $TXT; check mla2 to again.csv"
ok "mla: the session's calibration of the same digest reproduces" same_col conv.csv 6 again.csv 3 5
ok "mla: ... and says where the statistics came from" grep -q "from the session's calibration of the source)" out.txt

# ---- TransMLA, unit variance with a non-default seed: recorded, so check DIR draws it again
run -e "load $M as s; convert mla kv-rank 16 seed 7 to conv7.csv; export mla7"
run -e "check mla7 to dir7.csv"
ok "mla seed 7: check DIR = convert's out_err" same_col conv7.csv 6 dir7.csv 3 5
ok "mla seed 7: unit variance said" grep -q "64 random Gaussian tokens, seed 7, unit variance (the conversion's own" out.txt

# ---- TPA, calibrated: convert's report draws seed + layer with the calibration's second moment
run -e "load $M as s; calibrate $TXT; convert tpa kv-rank 2 to tpa.csv; check to tchk.csv; export tpa"
[ "$(rc)" = 0 ] || fail "convert tpa / check / export: rc $(rc) [$(cat err.txt)]"
ok "tpa: check in the session = convert's out_err" same_col tpa.csv 7 tchk.csv 3
ok "tpa: check in the session = convert's score_err" same_col tpa.csv 6 tchk.csv 2
ok "tpa: check names seed + layer and the statistics" grep -q "64 random Gaussian tokens, seed 20250604 + layer, with the second moment of the conversion's calibration" out.txt
ok "tpa: check's perplexity on the held-out text" grep -q "perplexity on 360 tokens, held out (the validation split of .*tinystory.txt, tokens 768-1129), windows of 256: 3.87574 before (source), [0-9.]* after (the TPA layers swapped in)" out.txt
ok "tpa: the export keeps the statistics" test -s tpa/check_inputs.safetensors
run -e "check tpa to tdir.csv"
[ "$(rc)" = 0 ] || fail "check TPA DIR: rc $(rc) [$(cat err.txt)]"
ok "tpa: check DIR (fresh process) = convert's out_err" same_col tpa.csv 7 tdir.csv 3

# ---- a conversion keeps the statistics it drew with: another `calibrate` before check / export
# changes nothing (the session's calibration is then another one)
run -e "load $M as s; calibrate $TXT; convert tpa kv-rank 2 to tpa2.csv; calibrate $TXT samples 1; check to tchk2.csv; export tpa2; convert mla kv-rank 16 to conv2.csv; calibrate $TXT; check to chk2.csv"
[ "$(rc)" = 0 ] || fail "recalibrated: rc $(rc) [$(cat err.txt)]"
ok "tpa after another calibrate: check = convert's out_err" same_col tpa2.csv 7 tchk2.csv 3
ok "tpa after another calibrate: the export keeps the conversion's statistics" test -s tpa2/check_inputs.safetensors
ok "mla after another calibrate: check = convert's out_err" same_col conv2.csv 6 chk2.csv 3 5

# ---- KQ-SVD: its export is recognised and evaluated as `kvsvd eval` evaluated it before export
run -e "load $M as s; calibrate $TXT; kvsvd learn all rank 4; kvsvd eval to ev.csv; export kq; check kq to kqs.csv"
[ "$(rc)" = 0 ] || fail "kvsvd learn / eval / export / check: rc $(rc) [$(cat err.txt)]"
ok "kvsvd: check DIR in the session = kvsvd eval's out_err" same_col ev.csv 9 kqs.csv 9
ok "kvsvd: ... and kq_err" same_col ev.csv 8 kqs.csv 8
ok "kvsvd: the recorded errors compared" grep -Eq "the errors the export recorded \(\`kvsvd eval\` before \`export\`\): out_err within [0-9.e-]+ of them in 15 layer-method rows$" out.txt
run -e "check kq"
ok "kvsvd: no text in a fresh process: refused, saying what to give" grep -q "give text FILE (the calibration text .*tinystory.txt reproduces its recorded errors)" err.txt
run -e "check kq text $TXT to kqf.csv"
ok "kvsvd: check DIR text FILE (fresh process) = kvsvd eval's out_err" same_col ev.csv 9 kqf.csv 9

# ---- what check DIR recognises: an unknown folder gets the list
mkdir -p stranger && echo '{}' > stranger/config.json
run -e "check stranger"
ok "unknown folder refused" test "$(rc)" = 1
ok "  with the manifests attnlab reads" grep -q "stranger is no attnlab export: check DIR reads the folders \`export\` writes, each marked by its manifest -- .*tpa_manifest.json.*attnlab_manifest.json.*kvsvd_manifest.json" err.txt

cli_done
