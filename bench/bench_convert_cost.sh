#!/bin/bash
# bench_convert_cost.sh OLD_BUILD NEW_BUILD MODEL [REPS] -- the CPU cost of `convert mla kv-rank R stats act`
# (issue 32: the conversion's per-layer cost) of two builds on one model, interleaved, on one thread
# (ATTNLAB_THREADS=1, OPENBLAS_NUM_THREADS=1), as process CPU seconds (user + system, /usr/bin/time): each
# build runs `load; set compute bf16; calibrate ids FILE samples S seqlen L inputs on` alone and with
# `; convert mla kv-rank R stats act ppl off` after it; the conversion's CPU is the difference (best of REPS,
# default 2). Also prints the new build's own "conversion:" line and checks that the two builds' reports
# are the same text. S x L: the issue's 4 x 512 unless BENCH_SAMPLES / BENCH_SEQLEN say otherwise (fewer
# tokens than an 8B layer's 4096 dims, as there). R: BENCH_KV_RANK, default 512.
# BENCH_THREADS=2 (cvp, s11): both builds on two threads instead (ATTNLAB_THREADS=2, OpenBLAS at its default), each
# round one run per build, and the conversion's wall and CPU seconds read from its own "conversion:" line (both builds
# print it), best of REPS and the ratios new / old.
[ $# -ge 3 ] || { echo "usage: $0 OLD_BUILD NEW_BUILD MODEL [REPS]" >&2; exit 2; }
OLD=$1 NEW=$2 M=$3 REPS=${4:-2} S=${BENCH_SAMPLES:-4} L=${BENCH_SEQLEN:-512} R=${BENCH_KV_RANK:-512}
W=$(mktemp -d /tmp/attnlab-convcost-XXXXXX); trap 'rm -rf "$W"' EXIT
V=$(grep -o '"vocab_size":[[:space:]]*[0-9]*' $M/config.json | grep -o '[0-9]*$')
awk -v n=$(((S + 1) * L + 16)) -v V="$V" 'BEGIN { s = 7; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % V } print "" }' > $W/ids.txt
TH=${BENCH_THREADS:-1}
if [ "$TH" = 1 ]; then export ATTNLAB_THREADS=1 OPENBLAS_NUM_THREADS=1; else export ATTNLAB_THREADS=$TH; unset OPENBLAS_NUM_THREADS; fi
CAL="load $M as m; set compute bf16; calibrate ids $W/ids.txt samples $S seqlen $L inputs on"
cpu() {   # cpu BUILD NAME CMDS: the process's user + system seconds
    /usr/bin/time -f "%U %S" -o $W/t "$1/attnlab" -e "$3" > $W/$2.out 2>&1 || { echo "$2 failed: $(tail -3 $W/$2.out)" >&2; exit 1; }
    awk '{ printf "%.2f", $1 + $2 }' $W/t
}
echo "load average at start: $(cat /proc/loadavg) ($(nproc) CPUs); $M, $S x $L calibration tokens, kv-rank $R, $TH thread(s)"
bo=1e9 bn=1e9
if [ "$TH" != 1 ]; then   # the conversion's own line: "conversion: W s (CPU C s)"
    wo=1e9 co=1e9 wn=1e9 cn=1e9
    for r in $(seq "$REPS"); do
        for b in old new; do
            B=$OLD; [ $b = new ] && B=$NEW
            cpu "$B" ${b}t$r "$CAL; convert mla kv-rank $R stats act ppl off" > /dev/null
            w=$(grep -m1 "^conversion:" $W/${b}t$r.out | sed -E 's/conversion: ([0-9.]+) s.*/\1/')
            c=$(grep -m1 "^conversion:" $W/${b}t$r.out | sed -E 's/.*\(CPU ([0-9.]+) s\).*/\1/')
            echo "  round $r $b: $(grep -m1 "^conversion:" $W/${b}t$r.out) [load $(cut -d' ' -f1 /proc/loadavg)]"
            if [ $b = old ]; then wo=$(awk -v a="$w" -v b="$wo" 'BEGIN { print (a < b ? a : b) }'); co=$(awk -v a="$c" -v b="$co" 'BEGIN { print (a < b ? a : b) }')
            else wn=$(awk -v a="$w" -v b="$wn" 'BEGIN { print (a < b ? a : b) }'); cn=$(awk -v a="$c" -v b="$cn" 'BEGIN { print (a < b ? a : b) }'); fi
        done
    done
    sed -n '/^layer  alpha/,$p' $W/oldt1.out > $W/ro; sed -n '/^layer  alpha/,$p' $W/newt1.out > $W/rn
    cmp -s $W/ro $W/rn && echo "reports: the same text" || { echo "reports DIFFER:"; diff $W/ro $W/rn | head; }
    echo "conversion wall (best of $REPS): old $wo s, new $wn s: new / old $(awk -v a="$wn" -v b="$wo" 'BEGIN { printf "%.3f", a / b }')"
    echo "conversion CPU (best of $REPS): old $co s, new $cn s: new / old $(awk -v a="$cn" -v b="$co" 'BEGIN { printf "%.3f", a / b }')"
    echo "load average at end: $(cat /proc/loadavg)"
    exit 0
fi
for r in $(seq "$REPS"); do
    for b in old new; do
        B=$OLD; [ $b = new ] && B=$NEW
        c=$(cpu "$B" ${b}c$r "$CAL"); t=$(cpu "$B" ${b}t$r "$CAL; convert mla kv-rank $R stats act ppl off")
        d=$(echo "$t - $c" | bc)
        echo "  round $r $b: calibrate $c s, calibrate + convert $t s: convert $d s CPU"
        if [ $b = old ]; then bo=$(awk -v a="$d" -v b="$bo" 'BEGIN { print (a < b ? a : b) }'); else bn=$(awk -v a="$d" -v b="$bn" 'BEGIN { print (a < b ? a : b) }'); fi
    done
done
grep -h "conversion:" $W/newt*.out | head -1
sed -n '/^layer  alpha/,$p' $W/oldt1.out > $W/ro; sed -n '/^layer  alpha/,$p' $W/newt1.out > $W/rn
cmp -s $W/ro $W/rn && echo "reports: the same text" || { echo "reports DIFFER:"; diff $W/ro $W/rn | head; }
echo "convert CPU (best of $REPS): old $bo s, new $bn s: new / old $(awk -v a="$bn" -v b="$bo" 'BEGIN { printf "%.3f", a / b }')"
echo "load average at end: $(cat /proc/loadavg)"
