#!/usr/bin/env bash
# bench_export_rss.sh -- peak memory (VmHWM, from /usr/bin/time -v) of the FaRR steps on a
# DeepSeek-R1-shaped checkpoint (issue 14, item 16), against the targets:
#   export            <= the truncation's own peak (its working copy) + 256 MB, whatever the shard size
#   fuse / truncate   <= the sweep's peak (`ranks vo all`) + the per-head working set they need
# Not a timed test: it prints peaks in MB, the differences and the limits.
#   bench/bench_export_rss.sh [--layers N] [--model DIR] [--attnlab BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
layers=4 model="" bin=build/attnlab
while [ $# -gt 0 ]; do
    case $1 in
        --layers) layers=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        --attnlab) bin=$2; shift 2 ;;
        *) echo "usage: $0 [--layers N] [--model DIR] [--attnlab BIN]" >&2; exit 2 ;;
    esac
done
tmp=$(mktemp -d /tmp/attnlab-rss.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$model" ]; then
    model=$tmp/r1
    "$bin" -e "synth ds-r1-shape $model layers $layers" >/dev/null
fi
# peak CMDS: VmHWM in MB of one attnlab run of CMDS over the model.
peak() {
    /usr/bin/time -v "$bin" -e "load $model; $1" >/dev/null 2>"$tmp/time" || { cat "$tmp/time" >&2; exit 1; }
    awk '/Maximum resident set size/ {printf "%d", $NF / 1024}' "$tmp/time"
}
synth=$( /usr/bin/time -v "$bin" -e "synth ds-r1-shape $tmp/s2 layers 2" 2>&1 >/dev/null |
         awk '/Maximum resident set size/ {printf "%d", $NF / 1024}' ); rm -rf "$tmp/s2"
sweep=$(peak "ranks vo all")
fuse=$(peak "fuse vo layer 0 head 0")
trunc=$(peak "truncate vo rank 64 policy model-max")
export_=$(peak "truncate vo rank 64 policy model-max; export $tmp/out")
echo "R1 shapes, $layers layers ($(du -sm "$model" | cut -f1) MB); peak RSS in MB"
printf '%-40s %6s\n' "synth ds-r1-shape (2 layers, one shard)" "$synth"
printf '%-40s %6s\n' "sweep: ranks vo all" "$sweep"
printf '%-40s %6s  (sweep + %d)\n' "fuse vo layer 0 head 0" "$fuse" $((fuse - sweep))
printf '%-40s %6s  (sweep + %d)\n' "truncate vo rank 64" "$trunc" $((trunc - sweep))
printf '%-40s %6s  (truncate + %d; target <= truncate + 256: %s)\n' "truncate + export (factors)" "$export_" \
    $((export_ - trunc)) "$([ $((export_ - trunc)) -le 256 ] && echo met || echo NOT met)"
