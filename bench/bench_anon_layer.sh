#!/usr/bin/env bash
# bench_anon_layer.sh -- issue 32's memory per 8B-width layer, builds (or settings) interleaved on the same models:
#     load; set compute bf16; calibrate ids ... samples S seqlen L inputs on; convert mla kv-rank 512
#     stats act; export DIR
# on a synthetic 8B-shaped BF16 model of 1 and of 2 layers (bench_forward --write-shape 8b, written once
# and reused), each variant's whole pipeline per layer count and round, sampled from /proc every 0.1 s:
# the peak RssAnon (and VmHWM, RssFile) of the process. The anonymous memory per layer is the 2-layer peak
# minus the 1-layer one; extrapolated to 32 layers: peak(1) + 31 x per-layer (and to 80: peak(1) + 79 x per-layer).
# written_MB is the process's write_bytes (bytes written, and pages dirtied through a mapping, counted when dirtied:
# a spill page dirtied again after the kernel wrote it back counts again); sys_wb_MB what the whole machine wrote
# back meanwhile (/proc/vmstat nr_written, other processes included: read it on an idle machine).
#
#   bench/bench_anon_layer.sh [-r ROUNDS] [-s SAMPLES] [-l SEQLEN] [-k calibrate|convert|export] NAME@BUILD[@K=V] ...
# (-k: the pipeline up to that step; export, the whole, by default)
# (a build is a folder with attnlab, e.g. another checkout's build/; K=V an environment setting for that
# variant's runs, e.g. TMPDIR=/dev/null (no spill file: the statistics and held matrices stay in memory) or
# GLIBC_TUNABLES=glibc.malloc.mmap_threshold=N to try an allocator setting without a rebuild).
# The models (2.3 / 2.8 GB) go under $TMPDIR (else /tmp) and are removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
R=1 S=2 L=512 K=export
while getopts r:s:l:k: o; do case $o in r) R=$OPTARG ;; s) S=$OPTARG ;; l) L=$OPTARG ;; k) K=$OPTARG ;; *) exit 2 ;; esac; done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-r ROUNDS] [-s SAMPLES] [-l SEQLEN] [-k calibrate|convert|export] NAME@BUILD[@K=V] ..." >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-anon-XXXXXX")
trap 'rm -rf "$W"' EXIT
P="calibrate ids $W/ids.txt samples $S seqlen $L inputs on"
case $K in calibrate) ;; convert) P="$P; convert mla kv-rank 512 stats act" ;; *) P="$P; convert mla kv-rank 512 stats act; export $W/e" ;; esac
export ATTNLAB_CACHE=${ATTNLAB_CACHE:-$W/cache}
for n in 1 2; do build/bench_forward --write-shape 8b "$W/m$n" $n >&2; done
awk -v n=$(((S + 1) * L + 16)) 'BEGIN { s = 7; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 32000 } print "" }' > "$W/ids.txt"
# Pages the kernel wrote back, whole machine (/proc/vmstat nr_written; other processes' writes included).
nr_written() { awk '/^nr_written / {print $2}' /proc/vmstat; }
# run BIN ENV N: one pipeline; prints peak RssAnon, VmHWM, RssFile (MB), wall s, written MB (write_bytes: the bytes
# the process wrote or dirtied through a mapping, counted when dirtied), CPU s, MB the machine wrote back meanwhile
run() {
    local t0 pid a h f k=0 hw=0 fl=0 wb=0 io ct=0 c n0
    t0=$(date +%s.%N) n0=$(nr_written)
    env ${2:+"$2"} "$1/attnlab" -e "load $W/m$3 as m; set compute bf16; $P" > "$W/out" 2>&1 &
    pid=$!
    while kill -0 $pid 2>/dev/null; do
        read -r a h f < <(awk '/^RssAnon/ {a=$2} /^VmHWM/ {h=$2} /^RssFile/ {f=$2} END {print a+0, h+0, f+0}' /proc/$pid/status 2>/dev/null || echo "0 0 0")
        [ "$a" -gt $k ] && k=$a; [ "$h" -gt $hw ] && hw=$h; [ "$f" -gt $fl ] && fl=$f
        io=$(awk '/^write_bytes/ {print $2}' /proc/$pid/io 2>/dev/null || true); [ -n "$io" ] && wb=$io
        c=$(awk '{print $14 + $15}' /proc/$pid/stat 2>/dev/null || true); [ -n "$c" ] && ct=$c
        sleep 0.1
    done
    wait $pid || { echo "failed:"; tail -5 "$W/out"; exit 1; }
    rm -rf "$W/e"
    echo "$((k / 1024)) $((hw / 1024)) $((fl / 1024)) $(echo "$(date +%s.%N) - $t0" | bc) $((wb / 1048576)) $(echo "$ct / $(getconf CLK_TCK)" | bc -l) $((($(nr_written) - n0) * $(getconf PAGESIZE) / 1048576))"
}
echo "load average at start: $(cat /proc/loadavg) ($(nproc) CPUs); 8B width, 1 and 2 layers, $S x $L calibration tokens"
printf "%-5s %-8s %-6s %9s %9s %9s %8s %7s %10s %9s\n" round variant layers anon_MB hwm_MB file_MB wall_s cpu_s written_MB sys_wb_MB
declare -A A
for r in $(seq 1 "$R"); do
    for spec in "$@"; do
        IFS=@ read -r tag b e <<<"$spec"
        case $b in /*) ;; *) b=$PWD/$b ;; esac
        for n in 1 2; do
            read -r a h f t w c y < <(run "$b" "$e" $n)
            printf "%-5s %-8s %-6s %9s %9s %9s %8.1f %7.1f %10s %9s\n" "$r" $tag $n "$a" "$h" "$f" "$t" "$c" "$w" "$y"
            A[$tag$n]=$a
        done
        awk -v t=$tag -v a1="${A[${tag}1]}" -v a2="${A[${tag}2]}" 'BEGIN { s = a2 - a1;
            printf "      %s: anonymous per 8B layer %.0f MB; at 32 layers %.2f GB, at 80 %.2f GB\n", t, s, (a1 + 31 * s) / 1024,
                   (a1 + 79 * s) / 1024 }'
    done
done
echo "load average at end: $(cat /proc/loadavg)"
