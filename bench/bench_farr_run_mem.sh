#!/usr/bin/env bash
# bench_farr_run_mem.sh -- the anonymous memory a truncated layer holds while `ppl` runs the FaRR working copy in
# compute bf16 (core/analysis/farr_run.c: the run layer's stock beside its float32 matrices), builds interleaved:
#     load M; set compute bf16; truncate vo rank 64; ppl ids IDS seqlen 64
# on a synthetic 8B-shaped BF16 model of 1 and of 2 layers (bench_forward --write-shape 8b, 2.4 / 2.9 GB under
# $TMPDIR, removed at the end), sampled from /proc every 0.05 s: peak RssAnon per run; per layer = peak(2) - peak(1).
#
#   bench/bench_farr_run_mem.sh [-r ROUNDS] BUILD ...      (a build: a folder with attnlab, e.g. build/)
set -euo pipefail
cd "$(dirname "$0")/.."
R=2
while getopts r: o; do case $o in r) R=$OPTARG ;; *) exit 2 ;; esac; done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-r ROUNDS] BUILD ..." >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-farrmem-XXXXXX")
trap 'rm -rf "$W"' EXIT
export ATTNLAB_CACHE=${ATTNLAB_CACHE:-$W/cache} ATTNLAB_THREADS=${ATTNLAB_THREADS:-1}
for n in 1 2; do build/bench_forward --write-shape 8b "$W/m$n" $n >&2; done
awk 'BEGIN { s = 7; for (i = 0; i < 200; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 32000 } print "" }' > "$W/ids.txt"
# peak BIN N: peak RssAnon (MB) of one run on the N-layer model, and its last ppl line
peak() {
    "$1/attnlab" -e "load $W/m$2 as m; set compute bf16; truncate vo rank 64; ppl ids $W/ids.txt seqlen 64" > "$W/out" 2>&1 &
    local pid=$! k=0 a
    while kill -0 $pid 2>/dev/null; do
        a=$(awk '/^RssAnon/ {print $2}' /proc/$pid/status 2>/dev/null || true)
        [ -n "$a" ] && [ "$a" -gt $k ] && k=$a
        sleep 0.05
    done
    wait $pid || { echo "failed:"; tail -5 "$W/out"; exit 1; }
    echo "$((k / 1024)) $(grep -E '^ +[0-9]+ +[0-9.]+ +[0-9.]+$' "$W/out" | tail -1 | awk '{print $3}')"
}
echo "load average at start: $(cat /proc/loadavg) ($(nproc) CPUs); ATTNLAB_THREADS=$ATTNLAB_THREADS"
for r in $(seq "$R"); do
    for b in "$@"; do
        read -r p1 q1 < <(peak "$b" 1)
        read -r p2 q2 < <(peak "$b" 2)
        echo "round $r $b: peak RssAnon 1 layer $p1 MB, 2 layers $p2 MB: per layer $((p2 - p1)) MB (ppl $q1 / $q2)"
    done
done
