#!/usr/bin/env bash
# bench_calib_interrupt.sh -- how long `calibrate` takes to stop after Ctrl-C: SIGINT a fixed time into a layer-major
# calibration of one group of windows (W x seqlen tokens) of a model written by tests/test_oss_bf16_experts (gpt_oss,
# BF16) and time from the signal to the process's exit, old and new binaries interleaved; each run's uninterrupted
# time of the same calibration first. Old: the whole group ran before the interrupt was seen; new: one layer's window.
# Prints seconds, not a pass / fail; and the load average.
#   bench/bench_calib_interrupt.sh --old BIN [--new BIN] [--at S] [--windows 8] [--seqlen 512] [--reps 2]
set -euo pipefail
cd "$(dirname "$0")/.."
old="" new=build/attnlab at=2 W=8 seqlen=512 reps=2
while [ $# -gt 0 ]; do
    case $1 in
        --old) old=$2; shift 2 ;;
        --new) new=$2; shift 2 ;;
        --at) at=$2; shift 2 ;;
        --windows) W=$2; shift 2 ;;
        --seqlen) seqlen=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        *) echo "usage: $0 --old BIN [--new BIN] [--at S] [--windows W] [--seqlen T] [--reps N]" >&2; exit 2 ;;
    esac
done
[ -x "$old" ] || { echo "$0: --old BIN (the binary before the change) is required" >&2; exit 2; }
tmp=$(mktemp -d /tmp/attnlab-calib-int.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
build/tests/test_oss_bf16_experts write "$tmp/m" 1024 1024 8 8
for i in $(seq 1 $((seqlen * (W + 1)))); do echo $(((i * 37 + 11) % 256)); done | tr '\n' ' ' > "$tmp/ids.txt"
cmd="load $tmp/m; calibrate ids $tmp/ids.txt samples $W seqlen $seqlen"
now() { date +%s.%N; }
echo "gpt_oss hidden 1024, 8 layers, 8 experts (BF16); calibrate $W windows of $seqlen (one layer-major group); SIGINT at ${at} s"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-4s %3s %10s %14s  %s\n' bin rep "whole s" "stop after s" "said"
for r in $(seq 1 "$reps"); do
    for b in old new; do
        bin=$old; [ $b = new ] && bin=$new
        t0=$(now); "$bin" -e "$cmd" >/dev/null 2>&1; whole=$(echo "$(now) - $t0" | bc)
        "$bin" -e "$cmd" >"$tmp/out" 2>&1 & pid=$!
        sleep "$at"; t1=$(now); kill -INT $pid 2>/dev/null || true; wait $pid || true; stop=$(echo "$(now) - $t1" | bc)
        printf '%-4s %3d %10.2f %14.2f  %s\n' $b "$r" "$whole" "$stop" "$(grep -m1 '^interrupted' "$tmp/out" | cut -c1-70)"
    done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
