#!/usr/bin/env bash
# bench_gguf_mxfp4.sh -- memory of a gpt-oss GGUF whose experts are MXFP4 (ggml type 39) against its BF16 twin
# (the same values), in builds given as NAME@BINARY, interleaved per round: peak RSS (VmHWM) and user CPU of
# `load F` and of `load F; ppl ids` (ATTNLAB_THREADS=1), with the load average. The files are written by
# build/tests/test_gguf_mxfp4 --write (one layer, hidden D, expert width I, E experts) into a scratch folder.
#
#   bench/bench_gguf_mxfp4.sh [--dims "D I E"] [--rounds N] NAME@BINARY ...
#   bench/bench_gguf_mxfp4.sh new@build/attnlab old@/tmp/s11-old/attnlab
set -eu
cd "$(dirname "$0")/.."
dims="1024 1024 32"
rounds=2
while [ $# -gt 0 ]; do
    case $1 in
    --dims) dims=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || set -- new@build/attnlab
dir=$(mktemp -d /tmp/bench-gguf-mxfp4.XXXXXX)
trap 'rm -rf "$dir"' EXIT
# shellcheck disable=SC2086
build/tests/test_gguf_mxfp4 --write "$dir/mx.gguf" mxfp4 $dims
# shellcheck disable=SC2086
build/tests/test_gguf_mxfp4 --write "$dir/bf.gguf" bf16 $dims
seq 1 60 | awk '{ printf "%d ", ($1 * 7) % 64 } END { print "" }' > "$dir/ids.txt"
echo "dims (hidden, expert width, experts) $dims; files: $(du -k "$dir/mx.gguf" | cut -f1) kB MXFP4, $(du -k "$dir/bf.gguf" | cut -f1) kB BF16"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
    for spec in "$@"; do
        name=${spec%%@*} bin=${spec#*@}
        for f in mx bf; do
            for what in "load" "ppl"; do
                cmd="load $dir/$f.gguf"
                [ "$what" = ppl ] && cmd="$cmd; ppl ids $dir/ids.txt seqlen 60"
                line=$(ATTNLAB_THREADS=1 /usr/bin/time -f "%M %U" "$bin" -e "$cmd" 2>&1 >/dev/null | tail -1)
                printf "round %s  %-6s %-5s %-4s peak %8d kB  user %5.2f s\n" "$r" "$name" "$f" "$what" ${line% *} ${line#* }
            done
        done
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
