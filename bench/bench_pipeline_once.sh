#!/bin/bash
# bench_pipeline_once.sh [--shape scaled|8b|70b LAYERS] BIN MODEL OUTDIR -- issue 32's pipeline in ONE
# process (as a researcher runs it), each step beside its floor, from one run:
#     load; set compute bf16; calibrate ids FILE samples 4 seqlen 512 inputs on; convert mla kv-rank 512 stats act; export DIR
# --shape: MODEL is written first (BIN's folder's bench_forward --write-shape SHAPE MODEL LAYERS) unless it
# has a config.json; LAYERS 0: the shape's own count (scaled 8, 8b 32, 70b 10).
# The pipeline runs under stdbuf -oL, so each output line is stamped when it is printed; the steps are
# cut at its lines: calibrate's "N sequences, T tokens in", convert's "conversion: X s" (the
# PCA solves, builds and reports of every layer, timed by tmla_convert), its "perplexity on" (before and
# after), then the report and the export to the end. The process is sampled from /proc every 0.2 s
# (RssAnon, VmHWM, rchar / wchar, read_bytes / write_bytes, minor faults): each step's peak anonymous
# memory and its bytes read and written are those samples between its cut points.
# Floors, measured in the same run: one warm read of the weights (cat), one L-token window (ppl of two
# windows minus ppl of one, so loading cancels; the prefill rate bench/ measures), the PCA solves (the
# conversion's own time: they are part of the floor), one write of the export's bytes (dd, fsync).
# load + calibrate: read + S windows; convert: its solves; perplexity: its windows (before and after);
# export: dd. The PCA solves' own floor, not the conversion's time: bench_pca_floor (BIN's folder) at the
# model's shape and layer count -- per layer the BLAS / LAPACK calls the conversion makes, in double, on its
# two lanes of one BLAS thread, nothing else -- run right after the pipeline; its row "convert: vs PCA
# floor" and the second floor total use it (BENCH_PCA_REPS rounds, default 2; BENCH_PCA_FLOOR=0 skips it). bench_pipeline.sh splits the same pipeline into steps (a process per prefix: three times
# the calibration); this runs it once, for the shapes too large to run three times (8B, 70B). The export
# lands in OUTDIR/export: leave room for it (~the model's size) and for dd's copy (BENCH_DROP_EXPORT=1 lists
# and removes it before dd).
shape="" SL=0
if [ "$1" = --shape ]; then shape=$2 SL=$3; shift 3; fi
B=$1 M=$2 O=$3; S=${BENCH_SAMPLES:-4} L=${BENCH_SEQLEN:-512}   # the issue's 4 x 512 unless set (a quick check)
[ $# = 3 ] || { echo "usage: $0 [--shape scaled|8b|70b LAYERS] BIN MODEL OUTDIR" >&2; exit 2; }
if [ -n "$shape" ]; then "$(dirname "$B")/bench_forward" --write-shape "$shape" "$M" "$SL" || exit 1; fi
mkdir -p $O; rm -rf $O/export
V=$(grep -o '"vocab_size":[[:space:]]*[0-9]*' $M/config.json | grep -o '[0-9]*$')
NL=$(grep -o '"num_hidden_layers":[[:space:]]*[0-9]*' $M/config.json | grep -o '[0-9]*$')
awk -v n=$(((S + 1) * L + 16)) -v V="$V" 'BEGIN { s = 7; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % V } print "" }' > $O/ids.txt
awk -v L="$L" '{ for (i = 1; i <= 2 * L; i++) printf "%s ", $i; print "" }' $O/ids.txt > $O/two.txt
awk -v L="$L" '{ for (i = 1; i <= L; i++) printf "%s ", $i; print "" }' $O/ids.txt > $O/one.txt
echo "load average at start: $(cat /proc/loadavg) ($(nproc) CPUs); $M: $NL layers, $(du -sb $M | awk '{printf "%.2f GB", $1/1e9}'); ATTNLAB_THREADS=${ATTNLAB_THREADS:-all}"
cat $M/*.safetensors > /dev/null
t0=$(date +%s.%N); cat $M/*.safetensors > /dev/null; t1=$(date +%s.%N); F_read=$(echo "$t1 - $t0" | bc)
echo "floor read (cat, warm): $F_read s, $(du -sb $M | cut -f1) bytes"
samp() {  # samp NAME CMDS: $O/NAME.out (each line stamped), $O/NAME.samples (t anon hwm rchar wchar rb wb minflt)
    local t0=$(date +%s.%N)
    ( stdbuf -oL "$B" -e "$2" 2>&1 | while IFS= read -r l; do printf '%8.2f %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$l"; done ) > $O/$1.out &
    sleep 0.3; local pid=$(pgrep -n -f "attnlab -e $(echo "$2" | cut -c1-20)")
    local pa=0 hw=0 io="" st="" a h i s x1 x2 x3 x4
    : > $O/$1.samples
    while kill -0 $pid 2>/dev/null; do
        a=$(awk '/RssAnon/ {print $2}' /proc/$pid/status 2>/dev/null); [ -n "$a" ] && [ "$a" -gt "$pa" ] && pa=$a
        h=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null); [ -n "$h" ] && hw=$h
        i=$(awk '{printf "%s ", $2}' /proc/$pid/io 2>/dev/null); [ -n "$i" ] && io=$i
        s=$(cut -d' ' -f10,14,15 /proc/$pid/stat 2>/dev/null); [ -n "$s" ] && st=$s
        [ -n "$a" ] && [ -n "$i" ] && { read -r x1 x2 _ _ x3 x4 _ <<<"$i"; echo "$(echo "$(date +%s.%N) - $t0" | bc) $a $h $x1 $x2 $x3 $x4 ${s%% *}" >> $O/$1.samples; }
        sleep 0.2
    done
    wait
    read -r rch wch _ _ rb wb _ <<<"$io"; read -r mf ut stt <<<"$st"
    W_all=$(echo "$(date +%s.%N) - $t0" | bc)
    echo "$1: wall $W_all s, user $((ut/100)) s, sys $((stt/100)) s, anon peak $((pa/1024)) MB, VmHWM $((hw/1024)) MB, rchar $((rch/1000000)) MB, wchar $((wch/1000000)) MB, read_bytes $((rb/1000000)) MB, write_bytes $((wb/1000000)) MB, minflt $mf"
}
samp ppl1 "load $M as m; set compute bf16; ppl ids $O/one.txt seqlen $L"; w1=$W_all
samp ppl2 "load $M as m; set compute bf16; ppl ids $O/two.txt seqlen $L"; w2=$W_all
F_win=$(echo "$w2 - $w1" | bc)
echo "floor window ($L tokens, ppl of 2 windows - ppl of 1): $F_win s"
samp pipe "load $M as m; set compute bf16; calibrate ids $O/ids.txt samples $S seqlen $L inputs on; convert mla kv-rank 512 stats act; export $O/export"
W_pipe=$W_all
grep -E "sequences, .* tokens in|^ *[0-9.]+ conversion:|perplexity on|error" $O/pipe.out | cut -c1-170
EB=$(du -sb $O/export | cut -f1)
# BENCH_DROP_EXPORT=1: the export removed before dd (disk for one copy, not two: the 70B shape on a 70 GB disk)
[ "${BENCH_DROP_EXPORT:-0}" = 1 ] && { ls -la $O/export > $O/export.list 2>&1; rm -rf $O/export; }
t0=$(date +%s.%N); dd if=/dev/zero of=$O/dd bs=16M count=$(((EB + 16777215) / 16777216)) conv=fsync status=none; t1=$(date +%s.%N); rm -f $O/dd
F_write=$(echo "$t1 - $t0" | bc)
echo "floor write (dd $EB bytes, fsync): $F_write s"
cfg() { grep -o "\"$1\":[[:space:]]*[0-9]*" $M/config.json | grep -o '[0-9]*$'; }
HID=$(cfg hidden_size) NH=$(cfg num_attention_heads) NKV=$(cfg num_key_value_heads) HD=$(cfg head_dim)
[ -n "$HD" ] || HD=$((HID / NH))
F_pca=""
if [ "${BENCH_PCA_FLOOR:-1}" != 0 ] && [ -x "$(dirname "$B")/bench_pca_floor" ]; then
    "$(dirname "$B")/bench_pca_floor" "$HID" "$NH" "${NKV:-$NH}" "$HD" "$NL" "${BENCH_PCA_REPS:-2}" > $O/pca_floor.out 2>&1
    sed 's/^/  /' $O/pca_floor.out
    F_pca=$(grep -m1 '^pca floor:' $O/pca_floor.out | sed -E 's/^pca floor: ([0-9.]+) s.*/\1/')
    C_pca=$(grep -m1 '^pca floor:' $O/pca_floor.out | sed -E 's/.*CPU ([0-9.]+) s a layer.*/\1/')
fi
# the cut points (seconds from the pipeline's start) and the conversion's own time
at() { grep -m1 -E "$1" $O/pipe.out | awk '{print $1}'; }
c_cal=$(at "sequences, .* tokens in") c_conv=$(at "^ *[0-9.]+ conversion:")
c_ppl=$(at "perplexity on [0-9]+ tokens")
T_solve=$(grep -m1 -E "^ *[0-9.]+ conversion:" $O/pipe.out | sed -E 's/.*conversion: ([0-9.]+) s.*/\1/')
C_solve=$(grep -m1 -E "^ *[0-9.]+ conversion:" $O/pipe.out | sed -E 's/.*\(CPU ([0-9.]+) s\).*/\1/')
ppl_tok=$(grep -m1 -E "perplexity on [0-9]+ tokens" $O/pipe.out | sed -E 's/.*perplexity on ([0-9]+) tokens.*/\1/')
[ -n "$c_cal" ] && [ -n "$c_conv" ] && [ -n "$T_solve" ] || { echo "the pipeline's lines are missing: see $O/pipe.out"; exit 1; }
[ -n "$c_ppl" ] || { c_ppl=$c_conv; ppl_tok=0; }
PW=$(echo "2 * $ppl_tok / $L" | bc -l | cut -c1-5)     # perplexity windows (of L tokens): before and after
echo
printf "%-26s %8s %8s %6s %9s %9s %9s %9s %9s\n" step time_s floor_s ratio anon_MB rchar_GB wchar_GB read_GB write_GB
row() {   # name t_from t_to time floor
    awk -v n="$1" -v a="$2" -v b="$3" -v t="$4" -v f="$5" '
        { if ($1 >= a && $1 <= b + 0.25) { if ($2 > pk) pk = $2; if (!s) { r0 = $4; w0 = $5; b0 = $6; c0 = $7; s = 1 } r1 = $4; w1 = $5; b1 = $6; c1 = $7 }
          else if ($1 < a) { r0 = $4; w0 = $5; b0 = $6; c0 = $7; s = 1 } }
        END { printf "%-26s %8.2f %8.2f %6.2f %9d %9.2f %9.2f %9.2f %9.2f\n", n, t, f, (f > 0 ? t / f : 0), pk / 1024,
              (r1 - r0) / 1e9, (w1 - w0) / 1e9, (b1 - b0) / 1e9, (c1 - c0) / 1e9 }' $O/pipe.samples
}
F_cal=$(echo "$F_read + $S * $F_win" | bc)
row "load + calibrate ($S x $L)" 0 "$c_cal" "$c_cal" "$F_cal"
row "convert: PCA solves" "$c_cal" "$c_conv" "$(echo "$c_conv - $c_cal" | bc)" "$T_solve"
[ -n "$F_pca" ] && row "convert: vs PCA floor" "$c_cal" "$c_conv" "$T_solve" "$F_pca"
row "convert: ppl ($PW windows)" "$c_conv" "$c_ppl" "$(echo "$c_ppl - $c_conv" | bc)" "$(echo "$PW * $F_win" | bc)"
row "report + export" "$c_ppl" "$W_pipe" "$(echo "$W_pipe - $c_ppl" | bc)" "$F_write"
F_all=$(echo "$F_cal + $T_solve + $PW * $F_win + $F_write" | bc)
row "pipeline" 0 "$W_pipe" "$W_pipe" "$F_all"
echo "floor: read $F_read s + $S + $PW windows x $F_win s + PCA solves $T_solve s (convert's 'conversion:' line; CPU $C_solve s) + write $F_write s = $F_all s"
if [ -n "$F_pca" ]; then
    F_all2=$(echo "$F_cal + $F_pca + $PW * $F_win + $F_write" | bc)
    echo "floor with the PCA solves' own floor (bench_pca_floor: $F_pca s): $F_all2 s; pipeline / it $(echo "$W_pipe / $F_all2" | bc -l | cut -c1-5); conversion / PCA floor $(echo "$T_solve / $F_pca" | bc -l | cut -c1-5) (CPU: $C_solve s / $NL x $C_pca s = $(echo "$C_solve / ($NL * $C_pca)" | bc -l | cut -c1-5))"
fi
echo "per layer ($NL layers): PCA solves $(echo "$T_solve / $NL" | bc -l | cut -c1-6) s${F_pca:+ (floor $(echo "$F_pca / $NL" | bc -l | cut -c1-6) s)}; pipeline $(echo "$W_pipe / $NL" | bc -l | cut -c1-6) s; export $(awk -v b="$EB" 'BEGIN { printf "%.2f GB", b / 1e9 }')"
echo "load average at end: $(cat /proc/loadavg)"
