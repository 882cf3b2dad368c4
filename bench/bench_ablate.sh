#!/usr/bin/env bash
# bench_ablate.sh -- `ablate FILE layer all` with the residual stream kept at each layer's input (each head
# reruns its layer onward: commands/headprobe.h's ProbeAblation) against a build that reruns the whole model
# per head, on the same model and text, interleaved, in CPU seconds (user + sys) with ATTNLAB_THREADS=1:
#   bench/bench_ablate.sh --bin OLD_ATTNLAB [MODEL] [TEXT] [ROUNDS]
# MODEL (default tests/models/stories260K-hf: 5 layers x 8 heads; a path or a name `load` takes), TEXT (default
# examples/tinystory.txt; "ids FILE" for token ids; max-tokens 2000, seqlen 256), ROUNDS (default 3) of new then old. Prints the load average before and after,
# each run's CPU seconds, the median ratio old / new, and whether the two tables are identical (they must be).
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
NEW=${ATTNLAB_BUILD:-$SRC/build}/attnlab
OLD=
MODEL=$SRC/tests/models/stories260K-hf
TEXT=$SRC/examples/tinystory.txt
ROUNDS=3
pos=0
while [ $# -gt 0 ]; do
    case $1 in
    --bin) OLD=$2; shift ;;
    *) case $pos in 0) MODEL=$1 ;; 1) TEXT=$1 ;; 2) ROUNDS=$1 ;; esac; pos=$((pos + 1)) ;;
    esac
    shift
done
[ -x "$OLD" ] || { echo "give --bin OLD_ATTNLAB (a build from before the kept stream)"; exit 2; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cpu() {   # cpu BIN OUT.csv: prints the run's user + sys seconds, or ERR
    local t
    t=$( { TIMEFORMAT='%U %S'; time ATTNLAB_THREADS=1 OPENBLAS_NUM_THREADS=1 "$1" -e \
        "load $MODEL; ablate $TEXT layer all max-tokens 2000 seqlen 256 to $2" >/dev/null 2>"$W/err"; } 2>&1) ||
        { echo ERR; return; }
    echo "$t" | awk '{printf "%.2f", $1 + $2}'
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
ratios=()
for r in $(seq "$ROUNDS"); do
    n=$(cpu "$NEW" "$W/new.csv")
    o=$(cpu "$OLD" "$W/old.csv")
    [ "$n" != ERR ] && [ "$o" != ERR ] || { echo "a run failed: $(cat "$W/err")"; exit 1; }
    ratios+=("$(echo "scale=3; $o / $n" | bc)")
    echo "round $r: kept stream ${n} s CPU, whole model per head ${o} s CPU, ratio ${ratios[-1]}"
    cmp -s "$W/new.csv" "$W/old.csv" || { echo "the tables differ:"; diff "$W/new.csv" "$W/old.csv" | head; exit 1; }
done
echo "median ratio (old / new): $(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(((ROUNDS + 1) / 2))p")"
echo "tables identical: yes ($(($(wc -l <"$W/new.csv") - 1)) rows)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
