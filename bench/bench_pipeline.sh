#!/usr/bin/env bash
# bench_pipeline.sh -- issue 32's research pipeline against its floor, step by step:
#     load; set compute bf16; calibrate ids FILE samples S seqlen L inputs on;
#     convert mla kv-rank R stats act; export DIR
# on a synthetic Llama-shaped BF16 model (bench_forward --write-shape: every layer random).
#
#   bench/bench_pipeline.sh [--shape scaled|8b|70b] [--layers N] [--model DIR] [--kv-rank R]
#                           [--samples S] [--seqlen L] [--keep] [--bin BUILD]
# (--bin: the build folder whose attnlab runs, e.g. another checkout's, to compare versions)
#   bench/bench_pipeline.sh --shape S --sweep "2 4 8" [...]: the whole pipeline on the shape with each
# layer count (a fresh model each, removed after), its peak RssAnon / VmHWM and time per count, the
# anonymous memory's slope per layer and its extrapolation to the shape's real layer count (does the
# memory grow with the model?); no floor.
#
# scaled: hidden 2048, 16 heads, 8 KV heads, head_dim 128, MLP 5632, vocab 32000, 8 layers (1.1 GB);
# 8b: Llama-3-8B's shape, 32 layers (16 GB); 70b: Llama-3-70B's (hidden 8192, 64 heads, 8 KV heads,
# MLP 28672), 10 layers (18 GB). The model is written under /tmp (or --model DIR, reused when it has
# a config.json) and removed at the end unless --keep or --model.
#
# Each step runs as the pipeline's prefix in a fresh process (calibrate; + convert; + export), its
# cost the difference to the previous prefix; each process is sampled every 0.1 s from /proc:
# peak VmHWM and RssAnon, rchar / wchar (bytes through read / write), read_bytes / write_bytes (the
# block layer's), minor faults. The floor, measured in the same run: the forward passes the
# pipeline needs (S calibration windows, the perplexity before and after: S + 2 windows of L
# tokens) at the prefill rate of `ppl` on this model (two windows minus one, so loading cancels),
# one read of the weights from the page cache (cat), the PCA solves (convert with ppl off, minus its
# prefix), one write of the export (dd of its bytes, fsync'd as the export is). Per-layer figures
# divide by the layer count: the 8b / 70b rows extrapolate from them.
set -euo pipefail
cd "$(dirname "$0")/.."
shape=scaled sweep= layers=0 model="" kvr="" S=4 L=512 keep=0 bin=build
while [ $# -gt 0 ]; do
    case $1 in
    --shape) shape=$2; shift ;;
    --layers) layers=$2; shift ;;
    --model) model=$2; keep=1; shift ;;
    --kv-rank) kvr=$2; shift ;;
    --samples) S=$2; shift ;;
    --seqlen) L=$2; shift ;;
    --keep) keep=1 ;;
    --bin) bin=$2; shift ;;
    --sweep) sweep=$2; shift ;;
    *) echo "usage: $0 [--shape scaled|8b|70b] [--layers N] [--model DIR] [--kv-rank R] [--samples S] [--seqlen L] [--keep] [--bin BUILD] [--sweep \"N1 N2 ...\"]" >&2; exit 2 ;;
    esac
    shift
done
case $bin in /*) A=$bin/attnlab ;; *) A=$PWD/$bin/attnlab ;; esac
W=$(mktemp -d /tmp/attnlab-pipeline-XXXXXX)
[ -n "$model" ] || model=$W/model
export ATTNLAB_CACHE=${ATTNLAB_CACHE:-$W/cache}
cleanup() { [ "$keep" = 1 ] || rm -rf "$model"; rm -rf "$W/export" "$W/dd" "$W"/*.out; [ "$keep" = 1 ] && [ "$model" = "$W/model" ] || rm -rf "$W"; }
trap cleanup EXIT
# meas NAME CMDS: runs attnlab -e CMDS, sampling it; sets the M_* variables
meas() {
    local t0 t1 pid a h i s
    t0=$(date +%s.%N)
    "$A" -e "$2" > "$W/$1.out" 2>&1 &
    pid=$!
    M_anon=0 M_hwm=0 M_io="" M_st=""
    while kill -0 $pid 2>/dev/null; do
        a=$(awk '/RssAnon/ {print $2}' /proc/$pid/status 2>/dev/null || true); [ -n "$a" ] && [ "$a" -gt "$M_anon" ] && M_anon=$a
        h=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null || true); [ -n "$h" ] && M_hwm=$h
        i=$(cat /proc/$pid/io 2>/dev/null | awk '{printf "%s ", $2}' || true); [ -n "$i" ] && M_io=$i
        s=$(cut -d' ' -f10,14,15 /proc/$pid/stat 2>/dev/null || true); [ -n "$s" ] && M_st=$s
        sleep 0.1
    done
    wait $pid || { echo "$1 failed:"; tail -5 "$W/$1.out"; exit 1; }
    t1=$(date +%s.%N)
    M_wall=$(echo "$t1 - $t0" | bc)
    read -r M_rchar M_wchar M_syscr M_syscw M_rb M_wb _ <<<"$M_io"
    read -r M_minflt M_ut M_st2 <<<"$M_st"
    M_cpu=$(echo "($M_ut + $M_st2) / $(getconf CLK_TCK)" | bc -l)
}
gb() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1e9 }'; }

# ---- --sweep: the pipeline's anonymous peak against the layer count (before the single run below)
if [ -n "$sweep" ]; then
    awk -v n=$(((S + 1) * L + 16)) 'BEGIN { s = 7; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 32000 } print "" }' > "$W/ids.txt"
    echo "load average at start: $(cat /proc/loadavg) ($(nproc) CPUs); $shape shape, $S x $L calibration tokens"
    printf "%-7s %9s %9s %9s\n" layers anon_MB hwm_MB time_s
    n0= a0= a1=
    for n in $sweep; do
        rm -rf "$W/sw"; build/bench_forward --write-shape "$shape" "$W/sw" "$n" >&2
        G=$(grep -o '"num_key_value_heads":[[:space:]]*[0-9]*' "$W/sw/config.json" | grep -o '[0-9]*$')
        meas sw$n "load $W/sw as m; set compute bf16; calibrate ids $W/ids.txt samples $S seqlen $L inputs on; convert mla kv-rank ${kvr:-$((G * 64))} stats act; export $W/sw-export"
        rm -rf "$W/sw" "$W/sw-export"
        printf "%-7s %9d %9d %9.1f\n" "$n" $((M_anon / 1024)) $((M_hwm / 1024)) "$M_wall"
        [ -z "$n0" ] && n0=$n a0=$M_anon
        n1=$n a1=$M_anon
    done
    full=$(case $shape in 8b) echo 32 ;; 70b) echo 80 ;; *) echo 8 ;; esac)
    [ "$n1" != "$n0" ] && awk -v n0="$n0" -v n1="$n1" -v a0="$a0" -v a1="$a1" -v L="$full" 'BEGIN {
        s = (a1 - a0) / (n1 - n0) / 1024; printf "anonymous memory per layer: %.1f MB; at %d layers: %.0f MB\n", s, L, a0 / 1024 + s * (L - n0) }'
    echo "load average at end: $(cat /proc/loadavg)"
    exit 0
fi
build/bench_forward --write-shape "$shape" "$model" "$layers" >&2     # this tree's writer, whatever --bin runs
NL=$(grep -o '"num_hidden_layers":[[:space:]]*[0-9]*' "$model/config.json" | grep -o '[0-9]*$')
V=$(grep -o '"vocab_size":[[:space:]]*[0-9]*' "$model/config.json" | grep -o '[0-9]*$')
G=$(grep -o '"num_key_value_heads":[[:space:]]*[0-9]*' "$model/config.json" | grep -o '[0-9]*$')
[ -n "$kvr" ] || kvr=$((G * 128 / 2))      # half the joint NoPE key / value basis (512 on the 8b shape)
# S training windows and one validation window (calib_windows keeps the last tenth, at least one)
awk -v n=$(((S + 1) * L + 16)) -v V="$V" 'BEGIN { s = 7; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % V } print "" }' > "$W/ids.txt"
awk -v L="$L" '{ for (i = 1; i <= 2 * L; i++) printf "%s ", $i; print "" }' "$W/ids.txt" > "$W/two.txt"
awk -v L="$L" '{ for (i = 1; i <= L; i++) printf "%s ", $i; print "" }' "$W/ids.txt" > "$W/one.txt"


echo "load average at start: $(cat /proc/loadavg) ($(nproc) CPUs)"
echo "model: $shape shape, $NL layers, $(du -sb "$model" | awk '{printf "%.2f GB", $1/1e9}') ($model); kv-rank $kvr; $S x $L calibration tokens"
LOAD="load $model as m; set compute bf16"
CAL="$LOAD; calibrate ids $W/ids.txt samples $S seqlen $L inputs on"
CONV="$CAL; convert mla kv-rank $kvr stats act"

# ---- the floor
cat "$model"/*.safetensors > /dev/null
t0=$(date +%s.%N); cat "$model"/*.safetensors > /dev/null; t1=$(date +%s.%N)
F_read=$(echo "$t1 - $t0" | bc)
meas ppl1 "$LOAD; ppl ids $W/one.txt seqlen $L"; w1=$M_wall
meas ppl2 "$LOAD; ppl ids $W/two.txt seqlen $L"; w2=$M_wall
F_win=$(echo "$w2 - $w1" | bc)
meas load "$LOAD"; T_load=$M_wall

# ---- the steps
meas cal "$CAL"; T_cal=$M_wall; C_cal=$M_cpu; R_cal=("$M_hwm" "$M_anon" "$M_rchar" "$M_wchar" "$M_rb" "$M_wb" "$M_minflt")
meas solve "$CONV ppl off"; T_solve=$M_wall; C_solve=$M_cpu
meas conv "$CONV"; T_conv=$M_wall; C_conv=$M_cpu; R_conv=("$M_hwm" "$M_anon" "$M_rchar" "$M_wchar" "$M_rb" "$M_wb" "$M_minflt")
meas exp "$CONV; export $W/export"; T_exp=$M_wall; C_exp=$M_cpu; R_exp=("$M_hwm" "$M_anon" "$M_rchar" "$M_wchar" "$M_rb" "$M_wb" "$M_minflt")
EB=$(du -sb "$W/export" | cut -f1)
t0=$(date +%s.%N); dd if=/dev/zero of="$W/dd" bs=16M count=$(((EB + 16777215) / 16777216)) conv=fsync status=none; t1=$(date +%s.%N)
F_write=$(echo "$t1 - $t0" | bc)
rm -f "$W/dd"
grep -h "perplexity on" "$W/conv.out" | cut -c1-160

F_pca=$(echo "$T_solve - $T_cal" | bc)
F_total=$(echo "$F_read + ($S + 2) * $F_win + $F_pca + $F_write" | bc)
echo
echo "floor: read $F_read s (cat, page cache warm); one $L-token window $F_win s (ppl: 2 windows - 1); $((S + 2)) windows; PCA solves $F_pca s (convert ppl off - calibrate); write $(gb "$EB") GB $F_write s (dd, fsync)"
echo "load alone (model_open, no step): $T_load s"
printf "%-22s %9s %9s %7s %9s %9s %9s %9s %9s %9s %9s\n" step time_s floor_s ratio peakRSS_MB anon_MB rchar_GB wchar_GB read_GB write_GB minflt
row() {   # name time floor hwm anon rchar wchar rb wb minflt
    printf "%-22s %9.2f %9.2f %7.2f %9d %9d %9s %9s %9s %9s %9d\n" "$1" "$2" "$3" "$(echo "$2 / $3" | bc -l)" $(($4 / 1024)) $(($5 / 1024)) \
        "$(gb "$6")" "$(gb "$7")" "$(gb "$8")" "$(gb "$9")" "${10}"
}
row "calibrate (+load)" "$T_cal" "$(echo "$F_read + $S * $F_win" | bc)" "${R_cal[@]}"
row "convert mla stats act" "$(echo "$T_conv - $T_cal" | bc)" "$(echo "2 * $F_win + $F_pca" | bc)" "${R_conv[0]}" "${R_conv[1]}" \
    $((R_conv[2] - R_cal[2])) $((R_conv[3] - R_cal[3])) $((R_conv[4] - R_cal[4])) $((R_conv[5] - R_cal[5])) $((R_conv[6] - R_cal[6]))
row "export" "$(echo "$T_exp - $T_conv" | bc)" "$F_write" "${R_exp[0]}" "${R_exp[1]}" \
    $((R_exp[2] - R_conv[2])) $((R_exp[3] - R_conv[3])) $((R_exp[4] - R_conv[4])) $((R_exp[5] - R_conv[5])) $((R_exp[6] - R_conv[6]))
row "pipeline" "$T_exp" "$F_total" "${R_exp[@]}"
echo "CPU seconds (user + system) of the prefixes: calibrate $C_cal, convert ppl off $C_solve, convert $C_conv, export $C_exp" | sed -E 's/([0-9]+\.[0-9]{2})[0-9]*/\1/g'
echo "per layer ($NL layers): pipeline $(echo "$T_exp / $NL" | bc -l | cut -c1-6) s, floor $(echo "$F_total / $NL" | bc -l | cut -c1-6) s; export $(gb "$EB") GB"
echo "load average at end: $(cat /proc/loadavg)"
