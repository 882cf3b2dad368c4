#!/usr/bin/env bash
# cli_calib_state.sh -- the session's calibrations are per model, said when replaced, scoped for
# figures and whole after Ctrl-C (issue 25, section 5), through `attnlab -e` and piped input on the
# real stories260K checkpoints (.bin and HF): two models each keep their own calibration and
# `kvsvd learn` (export of the first after the second learned); a second `calibrate` says in one
# line what it dropped; a figure's `calib FILE` leaves the session's calibration as it was;
# `save session` replays both models' calibrations; Ctrl-C (SIGINT) in `calibrate` (seen within one
# layer's window) leaves the calibration it found, said so, and the session goes on -- a calibration
# either completes or changes nothing --, as in a figure or `convert mla ... calib FILE`.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K/stories260K.bin stories260K-hf
cli_setup /tmp/attnlab-cli-calib-state shared-cache
cd "$T" || exit 1
A="load $M/stories260K/stories260K.bin as a"
HF="load $M/stories260K-hf as b"
STORY="${ATTNLAB_SRC:-$(dirname "$0")/..}/examples/tinystory.txt"
cp "$STORY" story.txt || exit 1
for i in $(seq 200); do cat story.txt; done >big.txt

# col FILE.csv LAYER COL: a field of a layer's row.
col() { awk -F, -v l="$2" -v c="$3" '$1 == l { print $c }' "$1"; }
# same_counts FILE.csv: every layer has the same tokens and sequences (and at least one).
same_counts() { awk -F, 'NR == 2 { t = $2; q = $3 } NR > 1 && ($2 != t || $3 != q || q < 1) { bad = 1 } END { exit bad || NR < 3 }' "$1"; }

# 1. Two models, each its own calibration and learned projections.
run -e "$A; calibrate story.txt seqlen 32 samples 4; kvsvd learn all rank 3; $HF; calibrate story.txt seqlen 32 samples 2; kvsvd learn ksvd rank 2; use a; calib info to ia.csv; export pa; use b; calib info to ib.csv; export pb"
[ "$(rc)" = 0 ] || fail "two models: rc $(rc): $(tail -3 err.txt)"
[ "$(col ia.csv 4 3),$(col ia.csv 4 2)" = "4,128" ] || fail "model a's calibration (4 x 32): [$(cat ia.csv 2>&1)]"
[ "$(col ib.csv 4 3),$(col ib.csv 4 2)" = "2,64" ] || fail "model b's calibration (2 x 32): [$(cat ib.csv 2>&1)]"
[ -f pa/kvsvd-kqsvd.safetensors ] && [ -f pa/kvsvd-ksvd.safetensors ] || fail "a's projections after b learned: [$(ls pa 2>&1)]"
[ -f pb/kvsvd-ksvd.safetensors ] && [ ! -f pb/kvsvd-kqsvd.safetensors ] || fail "b's projections: [$(ls pb 2>&1)]"
grep -q '"rank_k"\|rank' pa/kvsvd_manifest.json 2>/dev/null || fail "a's manifest: [$(head -c 300 pa/kvsvd_manifest.json 2>&1)]"

# 2. A second calibrate of a model says what it dropped (statistics and projections); b keeps its own.
run -e "$A; calibrate story.txt seqlen 32 samples 4; kvsvd learn all rank 3; $HF; calibrate story.txt seqlen 32 samples 2; use a; calibrate story.txt seqlen 16 samples 3; transforms; use b; calib info to ib.csv"
[ "$(rc)" = 0 ] || fail "second calibrate: rc $(rc): $(tail -3 err.txt)"
want="dropped the calibration of a (4 windows, 128 tokens of story.txt) and its kvsvd learn projections (K-SVD, Eigen, KQ-SVD): replaced by these statistics"
[ "$(grep -c -F -- "$want" out.txt)" = 1 ] || fail "the replacement is said once: [$(grep -i 'dropped\|replaced' out.txt)]"
[ "$(grep -c 'dropped' out.txt)" = 1 ] || fail "only the second calibrate of a drops something: [$(grep dropped out.txt)]"
[ "$(col ib.csv 0 3)" = 2 ] || fail "b's calibration after a's second: [$(cat ib.csv 2>&1)]"
run -e "$A; calibrate story.txt seqlen 32 samples 4; kvsvd learn all rank 3; kvsvd eval; kvsvd learn kqsvd rank 2; kvsvd learn eigen rank 2"
[ "$(grep -c '^replaced' out.txt)" = 2 ] &&
  grep -q -F "replaced the earlier KQ-SVD projections of a and their kvsvd eval errors; \`undo\` learns them again" out.txt ||
  fail "a second kvsvd learn says what it replaced: [$(grep replaced out.txt)]"
run -e "$A; calibrate story.txt seqlen 32 samples 4; calib save s4.safetensors; calibrate story.txt seqlen 16 samples 2; calib load s4.safetensors to il.csv"
grep -q -F "dropped the calibration of a (2 windows, 32 tokens of story.txt): replaced by these statistics" out.txt ||
  fail "calib load says what it replaced: [$(grep -i 'dropped\|loaded' out.txt)]"
[ "$(col il.csv 0 3)" = 4 ] || fail "calib load's statistics: [$(cat il.csv 2>&1)]"

# 3. A figure's calib FILE uses its own statistics: the session's calibration and projections stay.
run -e "$A; calibrate story.txt seqlen 32 samples 3; kvsvd learn kqsvd rank 2; plot key-norms layer 0 calib story.txt seqlen 16 samples 2 to kn.png; plot rope-energy calib story.txt seqlen 16 samples 5 to re.png; calib info to i3.csv; export p3"
[ "$(rc)" = 0 ] || fail "figures with calib FILE: rc $(rc): $(tail -3 err.txt)"
is_png kn.png && is_png re.png || fail "the figures are written"
[ "$(col i3.csv 0 3),$(col i3.csv 4 2)" = "3,96" ] || fail "figures left the session's calibration (3 x 32): [$(cat i3.csv 2>&1)]"
[ "$(grep -c "this command's own, the session's calibration is unchanged" out.txt)" = 2 ] ||
  fail "the figures say their statistics are their own: [$(grep 'activation statistics' out.txt)]"
[ -f p3/kvsvd-kqsvd.safetensors ] || fail "kvsvd learn survives the figures: [$(ls p3 2>&1)]"
grep -q dropped out.txt && fail "a figure dropped state: [$(grep dropped out.txt)]"

# 4. save session replays each model's calibration.
run -e "$A; calibrate story.txt seqlen 32 samples 4; $HF; calibrate story.txt seqlen 32 samples 2; save session sess.txt"
run -e "run sess.txt; use a; calib info to ra.csv; use b; calib info to rb.csv"
[ "$(rc)" = 0 ] || fail "session replay: rc $(rc): $(tail -3 err.txt)"
[ "$(col ra.csv 0 3),$(col rb.csv 0 3)" = "4,2" ] || fail "replayed calibrations: [$(cat ra.csv rb.csv 2>&1)]"

# ... in its place among the transformations: a calibrate after `convert mla ... calib` (which
# calibrated on other windows) and before `kvsvd learn` is replayed between them.
run -e "$A; convert mla kv-rank 16 calib story.txt seqlen 16 samples 4; calibrate story.txt seqlen 32 samples 3; kvsvd learn all rank 2; save session so.txt"
run -e "run so.txt; calib info to ro.csv; export po"
[ "$(rc)" = 0 ] || fail "ordered replay: rc $(rc): $(tail -3 err.txt)"
[ "$(col ro.csv 0 3),$(col ro.csv 0 2)" = "3,96" ] || fail "replayed calibration after convert mla calib: [$(cat ro.csv 2>&1)] from [$(grep -v '^set' so.txt)]"
grep -Eq '"tokens":[[:space:]]*96,' po/kvsvd_manifest.json 2>/dev/null ||
  fail "kvsvd learn replayed on the 96-token calibration: [$(head -c 400 po/kvsvd_manifest.json 2>&1)]"

# The interrupts land at random points of the calibration of big.txt: SLOW = 1500 windows of 64
# tokens, timed once uninterrupted (DUR ms), each run killed within its 25-65 %.
SLOW="calibrate big.txt seqlen 64 samples 1500"
now_ms() { date +%s%3N; }
t0=$(now_ms)
"$B" -e "$A; $SLOW" >/dev/null 2>&1
DUR=$(($(now_ms) - t0))
# at_random PID: SIGINT to PID at a random point of the calibration; 1 when PID had already ended
# (the timing run was slower than this one: a loaded machine), and DUR is halved for the next try.
at_random() {
    local span=$((DUR - ${FLOOR:-0}))
    local ms=$((${FLOOR:-0} + span / 4 + RANDOM % (span * 2 / 5 + 1)))
    sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    if kill -INT "$1" 2>/dev/null; then wait "$1"; return 0; fi
    wait "$1"
    DUR=$((DUR / 2))
    return 1
}
# until_landed CMD ARGS: runs CMD (which ends with at_random) until its SIGINT lands in a running
# attnlab, at most 6 times.
until_landed() {
    local i
    for i in 1 2 3 4 5 6; do "$@" && return 0; done
    return 1
}
# interrupt LINES: runs the lines (one command each, the slow one among them) through piped
# input, SIGINT at a random point of the calibration; output in out.txt.
interrupt() {
    printf '%s\n' "$1" | "$B" >out.txt 2>&1 &
    at_random $!        # the pipeline's last process: attnlab
}

# 5. Ctrl-C in calibrate leaves the calibration it found, says so, and the next command runs (three random
# points): the earlier 3 windows stay, and with none before, none after.
for t in 1 2 3; do
    rm -f i5.csv st.csv
    until_landed interrupt "$A
calibrate story.txt seqlen 32 samples 3
$SLOW to st.csv
calib info to i5.csv" || fail "try $t: the SIGINT never landed in a running calibrate"
    grep -q -F "interrupted: kept the calibration of a (3 windows, 96 tokens of story.txt), unchanged" out.txt ||
      fail "try $t: the interrupt says what stays: [$(grep -i interrupt out.txt)]"
    [ ! -f st.csv ] || fail "try $t: the interrupted calibrate wrote its table"
    same_counts i5.csv && [ "$(col i5.csv 0 3),$(col i5.csv 4 2)" = "3,96" ] ||
      fail "try $t: the calibration after the interrupt: [$(cut -d, -f1-3 i5.csv 2>&1 | tr '\n' ' ')]"
done
until_landed interrupt "$A
$SLOW
calib info" || fail "5: the SIGINT never landed in a first calibrate"
grep -q -F "interrupted: a still has no calibration" out.txt || fail "a first calibrate interrupted: [$(grep -i interrupt out.txt)]"
grep -q "no calibration statistics for a" out.txt || fail "calib info after it: [$(tail -2 out.txt)]"

# 5b. save session after an interrupted calibrate replays the calibration that stayed.
until_landed interrupt "$A
calibrate story.txt seqlen 32 samples 3
$SLOW
save session sp.txt" || fail "5b: the SIGINT never landed"
run -e "run sp.txt; calib info to rp.csv"
[ "$(rc)" = 0 ] || fail "replay after an interrupted calibrate: rc $(rc): $(tail -3 err.txt)"
[ "$(col rp.csv 0 3),$(col rp.csv 4 2)" = "3,96" ] || fail "replayed calibration: [$(cut -d, -f1-3 rp.csv | tr '\n' ' ')]: $(grep calib sp.txt)"

# 5c. Ctrl-C in kvsvd eval: the errors kept average the same whole windows in every layer -- the
# table equals an uninterrupted evaluation of as many windows.
EV="$A; calibrate story.txt seqlen 64 samples 4; kvsvd learn all rank 3; kvsvd eval text big.txt seqlen 64"
t0=$(now_ms)
"$B" -e "$EV samples 300" >/dev/null 2>&1
DUR=$(($(now_ms) - t0))
t0=$(now_ms)                # FLOOR: the part before the evaluation (a SIGINT there stops kvsvd learn)
"$B" -e "${EV%%; kvsvd eval*}" >/dev/null 2>&1
FLOOR=$(($(now_ms) - t0))
[ "$FLOOR" -lt "$DUR" ] || FLOOR=0
for t in 1 2 3; do
    eval_try() {
        rm -f ev.csv ew.csv
        "$B" -e "$EV samples 300 to ev.csv" >out.txt 2>&1 &
        at_random $! && grep -q -- "-- interrupted;" out.txt    # landed in the evaluation, not before it
    }
    until_landed eval_try || fail "eval try $t: the SIGINT never landed"
    k=$(sed -n 's/^\([0-9]*\) sequences\? in .* -- interrupted;.*/\1/p' out.txt)
    [ -n "$k" ] && [ "$k" -gt 0 ] && [ "$k" -lt 300 ] || { fail "eval try $t: not interrupted: [$(grep -i 'sequences\|interrupt' out.txt)]"; continue; }
    "$B" -e "$EV samples $k to ew.csv" >/dev/null 2>&1
    cmp -s ev.csv ew.csv || fail "eval try $t: interrupted after $k windows, the table is not $k windows': $(diff ev.csv ew.csv | head -4 | tr '\n' ' ')"
done
FLOOR=0

# 6. Ctrl-C in a figure's calib FILE or in convert mla's: the calibration found stays.
until_landed interrupt "$A
calibrate story.txt seqlen 32 samples 3
plot rope-removal calib big.txt seqlen 64 samples 1500 to rr.png
calib info to i6.csv" || fail "6: the SIGINT never landed"
grep -q "interrupted" out.txt || fail "figure: not interrupted: [$(tail -3 out.txt)]"
[ "$(col i6.csv 0 3),$(col i6.csv 4 2)" = "3,96" ] || fail "interrupted figure changed the calibration: [$(cat i6.csv 2>&1)]"
until_landed interrupt "$A
calibrate story.txt seqlen 32 samples 3
kvsvd learn ksvd rank 2
convert mla kv-rank 16 calib big.txt seqlen 64 samples 1500
calib info to i7.csv
transforms to x7.csv" || fail "6b: the SIGINT never landed"
grep -q -F "interrupted: kept the calibration of a (3 windows, 96 tokens of story.txt) and its kvsvd learn projections (K-SVD), unchanged" out.txt ||
  fail "convert mla: the interrupt says what stays: [$(grep -i interrupt out.txt)]"
[ "$(col i7.csv 0 3),$(col i7.csv 4 2)" = "3,96" ] || fail "interrupted convert changed the calibration: [$(cat i7.csv 2>&1)]"
grep -q "kvsvd learn" x7.csv || fail "interrupted convert dropped kvsvd learn: [$(cat x7.csv 2>&1)]"

cli_done
