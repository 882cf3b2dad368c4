#!/bin/bash
# bench_pipeline_once.sh BIN MODEL OUTDIR -- issue 32's pipeline in ONE process (as a researcher runs it):
#     load; set compute bf16; calibrate ids FILE samples 4 seqlen 512 inputs on; convert mla kv-rank 512 stats act; export DIR
# sampled from /proc every 0.2 s (peak RssAnon, VmHWM, rchar / wchar, read_bytes / write_bytes, minor faults,
# user / system CPU), then its floor's parts measured in the same run: one warm read of the weights (cat),
# one 512-token window (ppl of two windows minus ppl of one, so loading cancels), one write of the
# export's bytes (dd, fsync). bench_pipeline.sh splits the same pipeline into steps (a process per
# prefix: three times the calibration); this runs it once, for the shapes too large to run three times
# (8B, 70B). The export lands in OUTDIR/export: leave room for it (~the model's size) and for dd's copy.
B=$1 M=$2 O=$3; S=4 L=512
[ $# = 3 ] || { echo "usage: $0 BIN MODEL OUTDIR" >&2; exit 2; }
mkdir -p $O; rm -rf $O/export
V=$(grep -o '"vocab_size": [0-9]*' $M/config.json | grep -o '[0-9]*$')
awk -v n=$(((S + 1) * L + 16)) -v V="$V" 'BEGIN { s = 7; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % V } print "" }' > $O/ids.txt
awk -v L="$L" '{ for (i = 1; i <= 2 * L; i++) printf "%s ", $i; print "" }' $O/ids.txt > $O/two.txt
awk -v L="$L" '{ for (i = 1; i <= L; i++) printf "%s ", $i; print "" }' $O/ids.txt > $O/one.txt
echo "load average at start: $(cat /proc/loadavg)"
cat $M/*.safetensors > /dev/null
t0=$(date +%s.%N); cat $M/*.safetensors > /dev/null; t1=$(date +%s.%N); echo "floor read (cat, warm): $(echo "$t1 - $t0" | bc) s, $(du -sb $M | cut -f1) bytes"
samp() {  # samp NAME CMDS
    local t0=$(date +%s.%N)
    ( "$B" -e "$2" 2>&1 | while IFS= read -r l; do printf '%8.2f %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$l"; done ) > $O/$1.out &
    sleep 0.3; local pid=$(pgrep -n -f "attnlab -e $(echo "$2" | cut -c1-20)")
    local pa=0 hw=0 io="" st=""
    while kill -0 $pid 2>/dev/null; do
        a=$(awk '/RssAnon/ {print $2}' /proc/$pid/status 2>/dev/null); [ -n "$a" ] && [ "$a" -gt "$pa" ] && pa=$a
        h=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null); [ -n "$h" ] && hw=$h
        i=$(awk '{printf "%s ", $2}' /proc/$pid/io 2>/dev/null); [ -n "$i" ] && io=$i
        s=$(cut -d' ' -f10,14,15 /proc/$pid/stat 2>/dev/null); [ -n "$s" ] && st=$s
        sleep 0.2
    done
    wait
    read -r rch wch _ _ rb wb _ <<<"$io"; read -r mf ut stt <<<"$st"
    echo "$1: wall $(echo "$(date +%s.%N) - $t0" | bc) s, user $((ut/100)) s, sys $((stt/100)) s, anon peak $((pa/1024)) MB, VmHWM $((hw/1024)) MB, rchar $((rch/1000000)) MB, wchar $((wch/1000000)) MB, read_bytes $((rb/1000000)) MB, write_bytes $((wb/1000000)) MB, minflt $mf"
}
samp ppl1 "load $M as m; set compute bf16; ppl ids $O/one.txt seqlen $L"
samp ppl2 "load $M as m; set compute bf16; ppl ids $O/two.txt seqlen $L"
samp pipe "load $M as m; set compute bf16; calibrate ids $O/ids.txt samples $S seqlen $L inputs on; convert mla kv-rank 512 stats act; export $O/export"
EB=$(du -sb $O/export | cut -f1)
t0=$(date +%s.%N); dd if=/dev/zero of=$O/dd bs=16M count=$(((EB + 16777215) / 16777216)) conv=fsync status=none; t1=$(date +%s.%N); rm -f $O/dd
echo "floor write (dd $EB bytes, fsync): $(echo "$t1 - $t0" | bc) s"
echo "load average at end: $(cat /proc/loadavg)"
